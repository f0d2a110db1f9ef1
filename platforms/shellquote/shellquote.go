// Package shellquote quotes words for a POSIX shell: the wrapper scripts
// kiln writes for the Terraform engine and the commands it runs on hosts
// over SSH.
package shellquote

import "strings"

// Quote returns s as one word of a POSIX shell: in single quotes, with
// each single quote of s written as '\”.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
