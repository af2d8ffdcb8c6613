import Glibc
import Testing

@testable import ForsettiHost

/// The host's wake-up descriptor outlives the host while anything that may wake it does: a
/// waker called after the host was released (a watcher's thread finishing its last event) must
/// ring its own eventfd, never the number the application's next file was given.
@Suite struct WakeDescriptorTests {
  @Test func aWakerKeepsItsDescriptorAfterTheHostsWaiterIsGone() throws {
    var waiter: SignalWaiter? = SignalWaiter()
    let wake = try #require(waiter?.waker)
    let fd = try #require(waiter?.descriptor)
    try #require(fd >= 0)
    // Its identity: a closed number another test's eventfd took would pass every check below
    // but this one.
    var before = stat()
    try #require(fstat(fd, &before) == 0)
    waiter = nil
    // Still open, and still the eventfd: the waker holds it.
    #expect(fcntl(fd, F_GETFD) >= 0, "the descriptor was closed under a live waker")
    var after = stat()
    #expect(fstat(fd, &after) == 0 && after.st_ino == before.st_ino, "fd \(fd) is another file now")
    var link = [CChar](repeating: 0, count: 256)
    let n = readlink("/proc/self/fd/\(fd)", &link, link.count - 1)
    let target = n > 0 ? String(decoding: link[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    #expect(target.contains("eventfd"), "fd \(fd) is \(target)")
    wake()
    var count: UInt64 = 0
    #expect(read(fd, &count, 8) == 8 && count == 1, "the wake-up did not ring its own descriptor")
  }
}
