import ForsettiHost
import Testing

/// `--metrics` values: strict literals, errors naming the value.
@Suite struct MetricsAddressTests {
  @Test func parsesTheThreeForms() throws {
    #expect(try MetricsAddress(parsing: "9464") == MetricsAddress(host: "127.0.0.1", port: 9464))
    #expect(try MetricsAddress(parsing: "0.0.0.0:0") == MetricsAddress(host: "0.0.0.0", port: 0))
    #expect(try MetricsAddress(parsing: "[::1]:9464") == MetricsAddress(host: "::1", port: 9464))
    #expect(try MetricsAddress(parsing: "[::1]:9464").description == "[::1]:9464")
  }

  @Test(arguments: [
    "", "x", "65536", "-1", "+80", "localhost:80", "::1:80", "[::1]", "[::1]80", "1.2.3:80",
    "127.0.0.1:", "127.0.0.1:99999", "[127.0.0.1]:80", "127.0.0.1:8 0",
  ])
  func refusesAndNamesTheValue(_ text: String) {
    #expect(throws: MetricsAddress.ParseError.self) { try MetricsAddress(parsing: text) }
    do { _ = try MetricsAddress(parsing: text) } catch { #expect(error.description.contains("\"\(text)\"")) }
  }
}
