// Package shellquote quotes words for a POSIX shell: the wrapper scripts
// kiln writes for the Terraform engine and the commands it runs on hosts
// over SSH.
package shellquote

import "strings"

// Quote returns s as one word of a POSIX shell: in single quotes, each
// single quote of s ending the quoted part, escaped, and starting the next.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
