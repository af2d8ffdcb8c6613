import Glibc

/// A C callback and the context pointer the module gave with it. Opaque values handed back to
/// module code, never dereferenced by the host.
package struct ModuleCallback<F>: @unchecked Sendable {
  // @unchecked: `context` is the module's own pointer; the host only passes it back.
  package var function: F
  package var context: UnsafeMutableRawPointer?

  package init(function: F, context: UnsafeMutableRawPointer?) {
    self.function = function
    self.context = context
  }
}
