/// The debug screen's page, as SwiftPM compiled it into the host (`resources:` in Package.swift).
enum WebAssets {
  static let indexHTML = PackageResources.index_html
  static let appJS = PackageResources.app_js
  static let appCSS = PackageResources.app_css
}
