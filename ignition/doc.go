// Package ignition builds and validates the Ignition configs kiln emits.
//
// Every config is built with the types of ONE pinned spec version,
// SpecVersion, the newest the Ignition on kiln's nodes accepts (Debian's
// Ignition 2.14 takes 3.3.0 at most). Static units and files are authored as
// Butane (variant fcos 1.4, which translates to spec 3.3.0) and translated
// with github.com/coreos/butane. Marshal refuses a config that fails
// Ignition's own validator.
package ignition
