// Package installconfig is the install-config.yaml asset: its schema, the
// interactive survey, defaults and validation.
package installconfig
