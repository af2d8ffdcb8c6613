import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiRuntime

/// The readiness protocol against a real unix datagram socket standing in for the service
/// manager's, bound the two ways `$NOTIFY_SOCKET` may name it: a path and an abstract name.
@Suite(.onTestThreads) struct ServiceNotifierTests {
  /// A bound `SOCK_DGRAM` socket that receives what a service manager would, with the sender's
  /// credentials as the kernel attaches them (`SO_PASSCRED`), as systemd checks them.
  final class Manager {
    let fd: Int32
    /// What to put in `$NOTIFY_SOCKET`.
    let address: String

    init(address: String) throws {
      self.address = address
      fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
      try #require(fd >= 0)
      var on: Int32 = 1
      try #require(setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<Int32>.size)) == 0)
      var name = Array(address.utf8)
      if name.first == UInt8(ascii: "@") { name[0] = 0 }
      var a = sockaddr_un()
      a.sun_family = sa_family_t(AF_UNIX)
      withUnsafeMutableBytes(of: &a.sun_path) { $0.copyBytes(from: name) }
      let offset = try #require(MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path))
      let length = socklen_t(offset + name.count)
      let bound = withUnsafePointer(to: &a) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
      }
      try #require(bound == 0, "bind \(address): \(String(cString: strerror(errno)))")
    }

    deinit { close(fd) }

    /// `struct ucred` and `SCM_CREDENTIALS` (<bits/socket.h>), which Swift's Glibc leaves out
    /// because C declares them only under _GNU_SOURCE.
    struct Credentials {
      var pid: pid_t
      var uid: uid_t
      var gid: gid_t
    }
    static let scmCredentials: Int32 = 2

    /// The next datagram waiting and the pid the kernel says sent it; nil when none is waiting.
    func receive() -> (text: String, pid: pid_t?)? {
      var buffer = [UInt8](repeating: 0, count: 8192)
      var control = [UInt8](repeating: 0, count: 64)
      let n = buffer.withUnsafeMutableBytes { b in
        control.withUnsafeMutableBytes { c in
          var iov = iovec(iov_base: b.baseAddress, iov_len: b.count)
          return withUnsafeMutablePointer(to: &iov) { iovp in
            var msg = msghdr()
            msg.msg_iov = iovp
            msg.msg_iovlen = 1
            msg.msg_control = c.baseAddress
            msg.msg_controllen = c.count
            let n = recvmsg(fd, &msg, Int32(MSG_DONTWAIT))
            return (n, msg.msg_controllen)
          }
        }
      }
      guard n.0 >= 0 else { return nil }
      var pid: pid_t?
      // One SCM_CREDENTIALS message: a cmsghdr then a struct ucred, whose first field is the pid.
      let header = MemoryLayout<cmsghdr>.size
      if n.1 >= header + MemoryLayout<Credentials>.size {
        control.withUnsafeBytes { c in
          let h = c.loadUnaligned(as: cmsghdr.self)
          if h.cmsg_level == SOL_SOCKET, h.cmsg_type == Self.scmCredentials {
            pid = c.loadUnaligned(fromByteOffset: header, as: Credentials.self).pid
          }
        }
      }
      return (String(decoding: buffer[0..<n.0], as: UTF8.self), pid)
    }
  }

  static func abstractName() -> String { "@forsetti-notify-test-\(getpid())-\(UUID().uuidString)" }

  @Test func readyStatusAndStoppingReachASocketNamedByPath() throws {
    let dir = TemporaryDirectory("notify")
    let manager = try Manager(address: dir.url("notify.sock"))
    #expect(ServiceNotifier.ready(status: "2 modules running", socket: manager.address))
    let ready = try #require(manager.receive())
    #expect(ready.text == "READY=1\nMAINPID=\(getpid())\nSTATUS=2 modules running")
    // The manager attributes the message to the unit by the sender's pid, which the kernel
    // attaches: nothing of ours claims it.
    #expect(ready.pid == getpid())

    #expect(ServiceNotifier.status("1 module running, 1 failed", socket: manager.address))
    #expect(manager.receive()?.text == "STATUS=1 module running, 1 failed")
    #expect(ServiceNotifier.stopping(socket: manager.address))
    #expect(manager.receive()?.text == "STOPPING=1\nSTATUS=stopping all modules")
    #expect(manager.receive() == nil, "one datagram per call")
  }

  @Test func anAbstractSocketIsNamedWithAnAt() throws {
    let manager = try Manager(address: Self.abstractName())
    #expect(ServiceNotifier.ready(status: "ready", socket: manager.address))
    let got = try #require(manager.receive())
    #expect(got.text.hasPrefix("READY=1\n"))
    #expect(got.pid == getpid())
  }

  @Test func withoutNotifySocketNothingIsSent() {
    #expect(ServiceNotifier.socket(in: [:]) == nil)
    #expect(!ServiceNotifier.ready(status: "ready", socket: nil))
    #expect(!ServiceNotifier.stopping(socket: nil))
    #expect(!ServiceNotifier.status("x", socket: nil))
  }

  @Test func onlyPathsAndAbstractNamesAreSpoken() {
    #expect(ServiceNotifier.socket(in: ["NOTIFY_SOCKET": "/run/systemd/notify"]) == "/run/systemd/notify")
    #expect(ServiceNotifier.socket(in: ["NOTIFY_SOCKET": "@/org/example/notify"]) == "@/org/example/notify")
    // Relative paths mean nothing to the manager; vsock is for virtual machines, not hosts.
    #expect(ServiceNotifier.socket(in: ["NOTIFY_SOCKET": "notify.sock"]) == nil)
    #expect(ServiceNotifier.socket(in: ["NOTIFY_SOCKET": "vsock:2:1234"]) == nil)
    #expect(ServiceNotifier.socket(in: ["NOTIFY_SOCKET": ""]) == nil)
    // A name too long for sockaddr_un, or only "@", is not sent anywhere (and does not trap).
    #expect(!ServiceNotifier.ready(status: "x", socket: "/" + String(repeating: "a", count: 200)))
    #expect(!ServiceNotifier.ready(status: "x", socket: "@"))
  }

  @Test func aManagerThatIsGoneCostsNothing() throws {
    let dir = TemporaryDirectory("notify-gone")
    let path = dir.url("notify.sock")
    do { _ = try Manager(address: path) }  // bound, then closed: the path stays, nobody reads
    #expect(!ServiceNotifier.ready(status: "ready", socket: path))
    #expect(!ServiceNotifier.ready(status: "ready", socket: dir.url("never-bound.sock")))
  }

  /// A status is one line: text that reaches it (a module ID, a reason) must not add a
  /// `READY=1` or `MAINPID=` of its own, and a long one is cut, not refused whole.
  @Test func aStatusCannotAddAssignmentsAndIsBounded() throws {
    let manager = try Manager(address: Self.abstractName())
    #expect(ServiceNotifier.status("com.evil\nMAINPID=1\nREADY=1", socket: manager.address))
    let got = try #require(manager.receive()).text
    #expect(got == "STATUS=com.evil MAINPID=1 READY=1")
    #expect(got.split(separator: "\n").count == 1)

    #expect(ServiceNotifier.status(String(repeating: "é", count: 5000), socket: manager.address))
    let long = try #require(manager.receive()).text
    #expect(long.hasPrefix("STATUS=éé"))
    #expect(long.utf8.count <= "STATUS=".utf8.count + ServiceNotifier.maximumStatusBytes)
  }
}
