import CForsetti
import ForsettiBridge
import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Testing

/// Storage confined to `sandboxes/<moduleID>/`: the kernel resolves every path beneath it.
@Suite(.onTestThreads) struct SandboxTests {
  /// `make_directory` splits its path as NSString's path methods do, except that a one-letter
  /// name (`"a"`), which made Foundation trap and took the module's process down, now works.
  @Test func makeDirectorySplitsPathsLikeNSStringWithoutItsTraps() {
    let expected: [(String, String, String)] = [
      ("a", "", "a"), (".", "", "."), ("xy", "", "xy"), ("a/b", "a", "b"), ("a/b/", "a", "b"),
      ("a//b", "a", "b"), ("/x", "/", "x"), ("a/b/c//", "a/b", "c"), ("./x", ".", "x"), ("a/..", "a", ".."),
      ("a/b/./c", "a/b/.", "c"), ("///x", "/", "x"),
    ]
    for (path, parent, name) in expected {
      let split = SandboxStorage.splitLast(path)
      #expect(split.parent == parent && split.name == name, "\"\(path)\" split as \(split)")
    }
  }

  @Test func escapesAreRefusedAndTheSandboxWorks() throws {
    let h = RuntimeHarness()
    let outside = TemporaryDirectory("outside")
    try outside.write("secret.txt", "top secret")
    // A symlink planted inside the sandbox that points out of it, and one that stays inside.
    let sandbox = h.dir.url("state/sandboxes/com.test.boxed")
    try FileManager.default.createDirectory(atPath: sandbox, withIntermediateDirectories: true)
    try FileManager.default.createSymbolicLink(atPath: sandbox + "/out", withDestinationPath: outside.path)
    try FileManager.default.createSymbolicLink(atPath: sandbox + "/here", withDestinationPath: "inside")

    var f = ModuleFixture(moduleID: "com.test.boxed", entryPoint: "boxed_entry")
    f.prelude = """
      static int results[9];
      int result(int i) { return results[i]; }
      int r0(void){return result(0);} int r1(void){return result(1);} int r2(void){return result(2);}
      int r3(void){return result(3);} int r4(void){return result(4);} int r5(void){return result(5);}
      int r6(void){return result(6);} int r7(void){return result(7);} int r8(void){return result(8);}
      static int opened(const forsetti_storage *s, const char *p, uint32_t flags) {
        int fd = s->open_file(p, flags);
        if (fd >= 0) { close(fd); return 1; }
        return fd;
      }
      """
    f.start = """
      const forsetti_storage *s = host->resolve(FORSETTI_SERVICE_STORAGE);
      if (!s) return FORSETTI_ERR_START_FAILED;
      uint32_t w = FORSETTI_OPEN_WRITE | FORSETTI_OPEN_CREATE;
      results[0] = opened(s, "../escape.txt", w);
      results[1] = opened(s, "/etc/passwd", FORSETTI_OPEN_READ);
      results[2] = opened(s, "out/secret.txt", FORSETTI_OPEN_READ);
      results[3] = opened(s, "../com.test.neighbour/data", FORSETTI_OPEN_READ);
      results[4] = s->make_directory("inside");
      int fd = s->open_file("here/note.txt", w | FORSETTI_OPEN_TRUNCATE);
      if (fd >= 0) { results[5] = (int)write(fd, "kept", 4); close(fd); } else { results[5] = fd; }
      results[6] = opened(s, "inside/../inside/note.txt", FORSETTI_OPEN_READ);
      results[7] = opened(s, "/etc/passwd", FORSETTI_OPEN_WRITE);
      results[8] = s->make_directory("a");
      return FORSETTI_OK;
      """
    let so = try f.install(in: h.dir, capabilities: ["storage"])
    try h.start()
    #expect(h.state("com.test.boxed") == .started)
    #expect(h.call(so, "r0") == FORSETTI_ERR_DENIED)  // .. out of the sandbox
    #expect(h.call(so, "r1") == FORSETTI_ERR_DENIED)  // absolute path
    #expect(h.call(so, "r2") == FORSETTI_ERR_DENIED)  // symlink pointing out
    #expect(h.call(so, "r3") == FORSETTI_ERR_DENIED)  // another module's sandbox
    #expect(h.call(so, "r4") == FORSETTI_OK)
    #expect(h.call(so, "r5") == 4)  // a symlink that stays inside is fine
    #expect(h.call(so, "r6") == 1)  // .. that stays inside is fine
    #expect(h.call(so, "r7") == FORSETTI_ERR_DENIED)
    // A one-letter name used to make Foundation trap inside the host.
    #expect(h.call(so, "r8") == FORSETTI_OK)
    var isDirectory: ObjCBool = false
    #expect(
      FileManager.default.fileExists(atPath: sandbox + "/a", isDirectory: &isDirectory)
        && isDirectory.boolValue)
    #expect(try String(contentsOfFile: sandbox + "/inside/note.txt", encoding: .utf8) == "kept")
    #expect(!FileManager.default.fileExists(atPath: h.dir.url("state/sandboxes/escape.txt")))
    let refusals = h.lines("com.test.boxed").filter { $0.hasPrefix("storage: refused to open") }
    #expect(refusals.count == 5)
  }

  @Test func keyValueStorageRoundTripsAndValidatesKeys() throws {
    let h = RuntimeHarness()
    var f = ModuleFixture(moduleID: "com.test.kv", entryPoint: "kv_entry")
    f.prelude =
      "static int results[6]; int k0(void){return results[0];} int k1(void){return results[1];}"
      + "int k2(void){return results[2];} int k3(void){return results[3];} int k4(void){return results[4];} int k5(void){return results[5];}"
    f.start = """
      const forsetti_storage *s = host->resolve(FORSETTI_SERVICE_STORAGE);
      char buf[4]; size_t n = 0;
      results[0] = s->set("greeting", "hello world", 11);
      results[1] = s->get("greeting", buf, sizeof buf, &n);
      results[2] = (int)n;
      results[3] = s->set("../evil", "x", 1);
      results[4] = s->get("absent", buf, sizeof buf, &n);
      results[5] = s->remove("greeting") == FORSETTI_OK && s->get("greeting", buf, sizeof buf, &n) == FORSETTI_ERR_NOT_FOUND;
      return FORSETTI_OK;
      """
    let so = try f.install(in: h.dir, capabilities: ["storage"])
    try h.start()
    #expect(h.call(so, "k0") == FORSETTI_OK)
    #expect(h.call(so, "k1") == FORSETTI_ERR_BUFFER_TOO_SMALL)
    #expect(h.call(so, "k2") == 11)
    #expect(h.call(so, "k3") == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(h.call(so, "k4") == FORSETTI_ERR_NOT_FOUND)
    #expect(h.call(so, "k5") == 1)
  }
}
