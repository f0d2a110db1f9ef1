// Package platforms holds the interface every platform backend implements
// and the helpers they share; each platform lives in a sub-package.
package platforms
