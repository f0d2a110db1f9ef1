// Command timeline prints a per-phase timeline of one `kiln create cluster`
// run from what test/bench/timeline.sh collected: kiln's progress output
// with a wall-clock stamp on every line, kiln's debug log, and each
// machine's persistent journal and pod logs (CRI format). Every event is
// shown in seconds after the start of the command.
//
// Usage: go run ./test/bench/timeline -dir DIR/timeline [-images]
package main
