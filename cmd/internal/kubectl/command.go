package kubectl

import (
	"slices"
	"strings"
	"syscall"
)

// Command is one run of a kubectl binary, as data so that tests can check
// it without running anything.
type Command struct {
	// Path is the kubectl binary.
	Path string
	// Argv is the full argument vector, Argv[0] being Path.
	Argv []string
	// Env is the whole environment.
	Env []string
}

// New returns the run of the kubectl at bin with args against the
// cluster of kubeconfig (an absolute path): the environment is environ
// (os.Environ()) with KUBECONFIG naming kubeconfig alone.
func New(bin, kubeconfig string, args, environ []string) Command {
	env := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool { return strings.HasPrefix(kv, "KUBECONFIG=") })
	return Command{
		Path: bin,
		Argv: append([]string{bin}, args...),
		Env:  append(env, "KUBECONFIG="+kubeconfig),
	}
}

// Exec replaces the running process with c, so kubectl has the terminal,
// stdin, stdout, stderr and signals to itself and its exit code is the
// command's. It returns only when the exec failed.
func (c Command) Exec() error {
	return syscall.Exec(c.Path, c.Argv, c.Env)
}
