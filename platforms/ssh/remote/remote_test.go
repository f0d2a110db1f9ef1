package remote

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/kiln-project/kiln/platforms/ssh/remote/remotetest"
)

// server is an SSH server on loopback that runs exec requests with
// /bin/sh -c on this machine and forwards direct-tcpip channels (a
// bastion's work); it accepts one client key.
type server struct {
	addr    string
	hostKey ssh.PublicKey
	mu      sync.Mutex
	execs   []string // the commands it ran
	tunnels []string // the targets it forwarded to
	// running counts the commands under way (under mu): a test waits
	// for them before its temporary directories go.
	running int
}

// waitIdle waits until no command of s runs, at most timeout.
func (s *server) waitIdle(t *testing.T, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		n := s.running
		s.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d commands still run on the test host after %s", n, timeout)
		}
	}
}

func newServer(t *testing.T, client ssh.PublicKey) *server {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	conf := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) != string(client.Marshal()) {
			return nil, errors.New("unknown key")
		}
		return nil, nil
	}}
	conf.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &server{addr: ln.Addr().String(), hostKey: signer.PublicKey()}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(conn, conf)
		}
	}()
	return s
}

func (s *server) serve(conn net.Conn, conf *ssh.ServerConfig) {
	_, chans, reqs, err := ssh.NewServerConn(conn, conf)
	if err != nil {
		conn.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			ch, reqs, err := nc.Accept()
			if err != nil {
				continue
			}
			go s.session(ch, reqs)
		case "direct-tcpip":
			var target struct {
				Host       string
				Port       uint32
				OriginHost string
				OriginPort uint32
			}
			if err := ssh.Unmarshal(nc.ExtraData(), &target); err != nil {
				nc.Reject(ssh.ConnectionFailed, err.Error())
				continue
			}
			addr := net.JoinHostPort(target.Host, strconv.Itoa(int(target.Port)))
			out, err := net.Dial("tcp", addr)
			if err != nil {
				nc.Reject(ssh.ConnectionFailed, err.Error())
				continue
			}
			ch, reqs, err := nc.Accept()
			if err != nil {
				out.Close()
				continue
			}
			s.mu.Lock()
			s.tunnels = append(s.tunnels, addr)
			s.mu.Unlock()
			go ssh.DiscardRequests(reqs)
			go func() { io.Copy(out, ch); out.(*net.TCPConn).CloseWrite() }()
			go func() { io.Copy(ch, out); ch.Close() }()
		default:
			nc.Reject(ssh.UnknownChannelType, "no")
		}
	}
}

func (s *server) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			req.Reply(false, nil)
			continue
		}
		n := binary.BigEndian.Uint32(req.Payload)
		command := string(req.Payload[4 : 4+n])
		// Counted as running before the client hears the reply, so
		// before it sends the command a byte.
		s.mu.Lock()
		s.execs = append(s.execs, command)
		s.running++
		s.mu.Unlock()
		done := func() {
			s.mu.Lock()
			s.running--
			s.mu.Unlock()
		}
		req.Reply(true, nil)
		// The test's "sudo -n" is a sudo that wants a password.
		if strings.HasPrefix(command, "sudo -n ") {
			fmt.Fprintln(ch.Stderr(), "sudo: a password is required")
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{1}))
			done()
			return
		}
		cmd := exec.Command("/bin/sh", "-c", command)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
		status := uint32(0)
		err := cmd.Run()
		done()
		if err != nil {
			status = 1
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				status = uint32(exit.ExitCode())
			}
		}
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		return
	}
}

// keyFile writes a fresh client key and returns its path and public key.
func keyFile(t *testing.T) (string, ssh.PublicKey) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "id_ed25519")
	return path, remotetest.WriteKey(t, path)
}

// knownHosts writes a known_hosts file holding the servers' keys.
func knownHosts(t *testing.T, servers ...*server) string {
	t.Helper()
	var lines []string
	for _, s := range servers {
		lines = append(lines, knownhosts.Line([]string{knownhosts.Normalize(s.addr)}, s.hostKey))
	}
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func split(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	return h, port
}

// rootClient returns a test server and a client that logs into it as
// root with a key file, and the server's host to dial.
func rootClient(t *testing.T) (*Client, *server, string) {
	t.Helper()
	key, pub := keyFile(t)
	srv := newServer(t, pub)
	host, port := split(t, srv.addr)
	c, err := New(Config{User: "root", Port: port, IdentityFile: key, KnownHostsFile: knownHosts(t, srv)})
	if err != nil {
		t.Fatal(err)
	}
	return c, srv, host
}

// TestRunScript: a script runs on the host with its input and output; a
// failing one returns its standard error; a user other than root goes
// through sudo -n, and a sudo that wants a password is named.
func TestRunScript(t *testing.T) {
	c, srv, host := rootClient(t)
	out, err := c.RunScript(context.Background(), host, "read x; echo \"got $x\"; echo $((6*7))\n")
	if err != nil || string(out) != "got \n42\n" {
		t.Errorf("output %q, error %v", out, err)
	}
	_, err = c.RunScript(context.Background(), host, "echo broken >&2; exit 3\n")
	if err == nil || !strings.Contains(err.Error(), "exited with status 3: broken") {
		t.Errorf("failing script: %v", err)
	}
	c.cfg.User = "kiln"
	_, err = c.RunScript(context.Background(), host, "true\n")
	if err == nil || !strings.Contains(err.Error(), "kiln may not run commands as root without a password") {
		t.Errorf("sudo with a password: %v", err)
	}
	if want := []string{"/bin/sh -s", "/bin/sh -s", "sudo -n /bin/sh -s"}; strings.Join(srv.execs, ",") != strings.Join(want, ",") {
		t.Errorf("ran %q, want %q", srv.execs, want)
	}
}

// TestHostKeys: a host whose key is unknown, or differs from the one
// known, is refused before any command runs, with the fingerprint and
// the fix; a client key the host does not accept fails the handshake.
func TestHostKeys(t *testing.T) {
	key, pub := keyFile(t)
	srv, other := newServer(t, pub), newServer(t, pub)
	host, port := split(t, srv.addr)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A known_hosts line for srv's address with other's key.
	wrong := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(srv.addr)}, other.hostKey)
	if err := os.WriteFile(wrong, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		empty: "is not in " + empty + ": check it and add it (ssh-keyscan -p " + strconv.Itoa(port) + " " + host + " >> " + empty + ")",
		wrong: "is not the one " + wrong + " holds for it",
	} {
		c, err := New(Config{User: "root", Port: port, IdentityFile: key, KnownHostsFile: file})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.RunScript(context.Background(), host, "true\n")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ssh.FingerprintSHA256(srv.hostKey)) {
			t.Errorf("known hosts %s: error %v, want %q and the fingerprint", filepath.Base(file), err, want)
		}
	}
	stranger, _ := keyFile(t)
	c, err := New(Config{User: "root", Port: port, IdentityFile: stranger, KnownHostsFile: knownHosts(t, srv)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunScript(context.Background(), host, "true\n"); err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("a key the host refuses: %v", err)
	}
	if len(srv.execs) != 0 {
		t.Errorf("ran %q on a host it should not have trusted", srv.execs)
	}
}

// TestBastion: through a bastion the script runs on the target, both host
// keys are checked, and the bastion forwarded to the target.
func TestBastion(t *testing.T) {
	key, pub := keyFile(t)
	target, bastion := newServer(t, pub), newServer(t, pub)
	host, port := split(t, target.addr)
	c, err := New(Config{User: "root", Port: port, IdentityFile: key, KnownHostsFile: knownHosts(t, target, bastion), Bastion: bastion.addr})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.RunScript(context.Background(), host, "echo via\n"); err != nil || string(out) != "via\n" {
		t.Errorf("output %q, error %v", out, err)
	}
	if len(target.execs) != 1 || len(bastion.execs) != 0 || len(bastion.tunnels) != 1 || bastion.tunnels[0] != target.addr {
		t.Errorf("target ran %q, bastion ran %q and forwarded to %q", target.execs, bastion.execs, bastion.tunnels)
	}
	c, err = New(Config{User: "root", Port: port, IdentityFile: key, KnownHostsFile: knownHosts(t, target), Bastion: bastion.addr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunScript(context.Background(), host, "true\n"); err == nil || !strings.HasPrefix(err.Error(), "bastion: ") {
		t.Errorf("an unknown bastion: %v", err)
	}
}

// TestNewRefuses: a missing or encrypted key, no agent, no known hosts.
func TestNewRefuses(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	enc := filepath.Join(t.TempDir(), "id_enc")
	if err := os.WriteFile(enc, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	plain, _ := keyFile(t)
	t.Setenv("SSH_AUTH_SOCK", "")
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{IdentityFile: "/nonexistent/id", KnownHostsFile: "/dev/null"}, "reading the identity file"},
		{Config{IdentityFile: enc, KnownHostsFile: "/dev/null"}, "is encrypted: load it into ssh-agent"},
		{Config{KnownHostsFile: "/dev/null"}, "SSH_AUTH_SOCK names no agent"},
		{Config{IdentityFile: plain, KnownHostsFile: "/nonexistent/known_hosts"}, "known hosts: "},
	} {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

// TestAgent: without an identity file the key comes from the agent at
// $SSH_AUTH_SOCK.
func TestAgent(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go agent.ServeAgent(keyring, conn)
		}
	}()
	signer, _ := ssh.NewSignerFromKey(priv)
	srv := newServer(t, signer.PublicKey())
	host, port := split(t, srv.addr)
	t.Setenv("SSH_AUTH_SOCK", sock)
	c, err := New(Config{User: "root", Port: port, KnownHostsFile: knownHosts(t, srv)})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.RunScript(context.Background(), host, "echo agent\n"); err != nil || string(out) != "agent\n" {
		t.Errorf("output %q, error %v", out, err)
	}
}
