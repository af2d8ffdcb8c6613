import CFFI
import Glibc
import Synchronization

/// One C function pointer made at run time with libffi: calling it runs `handler` with the
/// raw arguments. This is how each module gets host functions bound to its own identity: the
/// binding lives in the closure, not in an argument the module could choose.
///
/// Closures are never freed. A module may keep a function pointer and call it after `stop`, from
/// any thread; the closure must stay valid so that such a call reaches the revoked binding and
/// returns an error instead of jumping into freed memory. The cost is a few hundred bytes per
/// function per module start.
package final class FFIClosure: @unchecked Sendable {
  // @unchecked: every stored property is written once in init and only read afterwards.
  package typealias Handler = @Sendable (FFIArguments) -> FFIReturn

  package let code: UnsafeMutableRawPointer
  private let handler: Handler
  private let cif: UnsafeMutablePointer<ffi_cif>
  private let argTypes: UnsafeMutablePointer<UnsafeMutablePointer<ffi_type>?>

  /// Every closure ever made, kept alive on purpose (see the type's comment).
  private static let registry = Mutex<[FFIClosure]>([])

  package enum MakeError: Error { case prepCIF(Int), alloc, prepClosure(Int) }

  package init(
    arguments: [UnsafeMutablePointer<ffi_type>], returns: UnsafeMutablePointer<ffi_type>,
    handler: @escaping Handler
  )
    throws(MakeError)
  {
    self.handler = handler
    cif = .allocate(capacity: 1)
    argTypes = .allocate(capacity: max(1, arguments.count))
    for (i, t) in arguments.enumerated() { argTypes[i] = t }
    let status = ffi_prep_cif(cif, FFI_DEFAULT_ABI, UInt32(arguments.count), returns, argTypes)
    guard status == FFI_OK else { throw .prepCIF(Int(status.rawValue)) }
    var codePointer: UnsafeMutableRawPointer?
    guard let raw = ffi_closure_alloc(MemoryLayout<ffi_closure>.size, &codePointer), let codePointer else {
      throw .alloc
    }
    code = codePointer
    let closure = raw.assumingMemoryBound(to: ffi_closure.self)
    let prep = ffi_prep_closure_loc(
      closure, cif, ffiTrampoline, Unmanaged.passUnretained(self).toOpaque(), codePointer)
    guard prep == FFI_OK else { throw .prepClosure(Int(prep.rawValue)) }
    FFIClosure.registry.withLock { $0.append(self) }
  }

  fileprivate func invoke(
    _ args: UnsafeMutablePointer<UnsafeMutableRawPointer?>, _ ret: UnsafeMutableRawPointer
  ) {
    switch handler(FFIArguments(raw: args)) {
    case .void: break
    // libffi wants integral results widened to a full ffi_arg register.
    case .int32(let v): ret.storeBytes(of: Int64(v), as: Int64.self)
    case .int64(let v): ret.storeBytes(of: v, as: Int64.self)
    case .pointer(let p): ret.storeBytes(of: p, as: UnsafeRawPointer?.self)
    }
  }

  /// The closure as a C function pointer of type `F`.
  package func function<F>(as type: F.Type) -> F { unsafeBitCast(code, to: type) }
}

private let ffiTrampoline:
  @convention(c) (
    UnsafeMutablePointer<ffi_cif>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    UnsafeMutableRawPointer?
  ) -> Void = { _, ret, args, userData in
    guard let ret, let args, let userData else { return }
    // The registry keeps every closure alive for good, so the reference needs no retain and
    // release per call (an atomic pair that was a fifth of a host call's cost).
    Unmanaged<FFIClosure>.fromOpaque(userData)._withUnsafeGuaranteedRef { $0.invoke(args, ret) }
  }

/// Typed access to the argument array libffi hands a closure.
package struct FFIArguments {
  package let raw: UnsafeMutablePointer<UnsafeMutableRawPointer?>

  package func int32(_ i: Int) -> Int32 { raw[i]?.load(as: Int32.self) ?? 0 }
  package func uint32(_ i: Int) -> UInt32 { raw[i]?.load(as: UInt32.self) ?? 0 }
  package func int64(_ i: Int) -> Int64 { raw[i]?.load(as: Int64.self) ?? 0 }
  /// A size_t argument, clamped so that a huge value reads as "too large", never as negative.
  package func size(_ i: Int) -> Int { Int(clamping: raw[i]?.load(as: UInt.self) ?? 0) }
  package func pointer(_ i: Int) -> UnsafeMutableRawPointer? {
    raw[i]?.load(as: UnsafeMutableRawPointer?.self) ?? nil
  }
  package func cString(_ i: Int) -> UnsafePointer<CChar>? {
    pointer(i).map { UnsafePointer($0.assumingMemoryBound(to: CChar.self)) }
  }
}

/// What a closure returns to its C caller.
package enum FFIReturn {
  case void
  case int32(Int32)
  case int64(Int64)
  case pointer(UnsafeRawPointer?)
}

/// libffi's type descriptors, named.
package enum FFIType {
  package static var void: UnsafeMutablePointer<ffi_type> { forsetti_ffi_void() }
  package static var pointer: UnsafeMutablePointer<ffi_type> { forsetti_ffi_pointer() }
  package static var int32: UnsafeMutablePointer<ffi_type> { forsetti_ffi_sint32() }
  package static var uint32: UnsafeMutablePointer<ffi_type> { forsetti_ffi_uint32() }
  package static var int64: UnsafeMutablePointer<ffi_type> { forsetti_ffi_sint64() }
  package static var size: UnsafeMutablePointer<ffi_type> { forsetti_ffi_size() }
}
