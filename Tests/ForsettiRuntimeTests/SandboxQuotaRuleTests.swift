import Testing

@testable import ForsettiRuntime

/// The sandbox quota's rule (`SandboxQuota`) apart from any worker: when writes are refused,
/// allowed again, and locked for good.
@Suite struct SandboxQuotaRuleTests {
  let quota: UInt64 = 8 << 20

  @Test func writesAreRefusedAtTheQuotaAndAllowedBelowIt() {
    #expect(SandboxQuota.next(.under, usage: quota - 1, quota: quota, softLimit: quota) == (.under, .none))
    #expect(SandboxQuota.next(.under, usage: quota, quota: quota, softLimit: quota) == (.over, .refuseWrites))
    #expect(SandboxQuota.next(.over, usage: quota + 1, quota: quota, softLimit: 0) == (.over, .none))
    #expect(SandboxQuota.next(.over, usage: quota - 1, quota: quota, softLimit: 0) == (.under, .allowWrites))
  }

  @Test func aModuleRaisingItsOwnLimitWhileOverIsLockedForGood() {
    #expect(SandboxQuota.next(.over, usage: quota + 1, quota: quota, softLimit: quota) == (.locked, .lock))
    // Raised and then freed space: still locked.
    #expect(SandboxQuota.next(.over, usage: 0, quota: quota, softLimit: 1) == (.locked, .lock))
    #expect(SandboxQuota.next(.locked, usage: 0, quota: quota, softLimit: 0) == (.locked, .none))
  }

  @Test func aWorkerStartsWithNoFileLargerThanTheQuota() {
    #expect(SandboxQuota.startLimit(fileSizeBytes: 1 << 30, quota: quota) == quota)
    #expect(SandboxQuota.startLimit(fileSizeBytes: 1 << 20, quota: quota) == 1 << 20)
    #expect(SandboxQuota.startLimit(fileSizeBytes: 1 << 30, quota: nil) == 1 << 30)
    #expect(SandboxQuota.startLimit(fileSizeBytes: nil, quota: quota) == quota)
  }

  @Test func nearTheQuotaTheSandboxIsCountedOften() {
    #expect(SandboxQuota.intervalMilliseconds(usage: 0, quota: quota) == 1000)
    #expect(SandboxQuota.intervalMilliseconds(usage: quota / 4 * 3, quota: quota) == 100)
    #expect(SandboxQuota.intervalMilliseconds(usage: quota * 2, quota: quota) == 100)
  }
}
