// Package crashtest proves kiln's --dir crash safety on the real targets:
// its test interrupts `create manifests` and `create ignition-configs` at
// every file operation, by a crash or by an I/O error, and checks that the
// next run converges (docs/crash-safety.md). It has no code of its own.
package crashtest
