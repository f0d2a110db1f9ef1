// Package remote runs commands as root on the hosts of an ssh-platform
// cluster: it dials them over SSH (directly or through a bastion),
// authenticates with a private key file or the user's agent, verifies
// each host's key against a known_hosts file, and runs a script under
// /bin/sh, through sudo when the login user is not root.
package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Config is how kiln reaches the hosts.
type Config struct {
	// User logs in; a user other than root runs scripts through sudo -n.
	User string
	// Port is the hosts' SSH port.
	Port int
	// IdentityFile is the private key to log in with; "" uses the agent
	// at $SSH_AUTH_SOCK.
	IdentityFile string
	// KnownHostsFile holds the hosts' (and the bastion's) keys: a host
	// whose key is not there is refused.
	KnownHostsFile string
	// Bastion, when not "", is host[:port] of a jump host to dial through,
	// with the same user and key.
	Bastion string
	// Timeout bounds each dial and handshake; 0 is 15 s.
	Timeout time.Duration
}

// Client dials hosts with one Config.
type Client struct {
	cfg   Config
	auth  []ssh.AuthMethod // the identity file's key, or nil
	agent string           // the agent's socket, when no identity file
	keys  ssh.HostKeyCallback
}

// New reads the key (or finds the agent) and the known hosts.
func New(cfg Config) (*Client, error) {
	c := &Client{cfg: cfg}
	if c.cfg.Timeout == 0 {
		c.cfg.Timeout = 15 * time.Second
	}
	if cfg.IdentityFile != "" {
		pem, err := os.ReadFile(cfg.IdentityFile)
		if err != nil {
			return nil, fmt.Errorf("reading the identity file: %w", err)
		}
		signer, err := ssh.ParsePrivateKey(pem)
		if err != nil {
			var missing *ssh.PassphraseMissingError
			if errors.As(err, &missing) {
				return nil, fmt.Errorf("identity file %s is encrypted: load it into ssh-agent and log in through the agent instead", cfg.IdentityFile)
			}
			return nil, fmt.Errorf("identity file %s: %w", cfg.IdentityFile, err)
		}
		c.auth = []ssh.AuthMethod{ssh.PublicKeys(signer)}
	} else {
		sock := os.Getenv("SSH_AUTH_SOCK")
		if sock == "" {
			return nil, errors.New("no identity file is set and SSH_AUTH_SOCK names no agent")
		}
		c.agent = sock
	}
	keys, err := knownhosts.New(cfg.KnownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("known hosts: %w", err)
	}
	c.keys = func(host string, remote net.Addr, key ssh.PublicKey) error {
		err := keys(host, remote, key)
		var kerr *knownhosts.KeyError
		if errors.As(err, &kerr) {
			if len(kerr.Want) == 0 {
				return fmt.Errorf("%s's host key (%s %s) is not in %s: check it and add it (ssh-keyscan -p %s %s >> %s)",
					host, key.Type(), ssh.FingerprintSHA256(key), cfg.KnownHostsFile, portOf(host), hostOf(host), cfg.KnownHostsFile)
			}
			return fmt.Errorf("%s's host key (%s %s) is not the one %s holds for it: the host was reinstalled, or someone is in the middle",
				host, key.Type(), ssh.FingerprintSHA256(key), cfg.KnownHostsFile)
		}
		return err
	}
	return c, nil
}

// Dial connects to address (a host name or IP) as the configured user.
func (c *Client) Dial(ctx context.Context, address string) (*ssh.Client, error) {
	target := net.JoinHostPort(address, strconv.Itoa(c.port()))
	conf := &ssh.ClientConfig{User: c.cfg.User, Auth: c.auth, HostKeyCallback: c.keys, Timeout: c.cfg.Timeout}
	if c.agent != "" {
		// The agent signs during the handshakes, over one connection.
		conn, err := net.Dial("unix", c.agent)
		if err != nil {
			return nil, fmt.Errorf("ssh-agent at %s: %w", c.agent, err)
		}
		defer conn.Close()
		conf.Auth = []ssh.AuthMethod{ssh.PublicKeysCallback(agent.NewClient(conn).Signers)}
	}
	if c.cfg.Bastion == "" {
		d := net.Dialer{Timeout: c.cfg.Timeout}
		conn, err := d.DialContext(ctx, "tcp", target)
		if err != nil {
			return nil, err
		}
		return handshake(conn, target, conf)
	}
	bastion := c.cfg.Bastion
	if _, _, err := net.SplitHostPort(bastion); err != nil {
		bastion = net.JoinHostPort(bastion, "22")
	}
	d := net.Dialer{Timeout: c.cfg.Timeout}
	conn, err := d.DialContext(ctx, "tcp", bastion)
	if err != nil {
		return nil, fmt.Errorf("bastion: %w", err)
	}
	jump, err := handshake(conn, bastion, conf)
	if err != nil {
		return nil, fmt.Errorf("bastion: %w", err)
	}
	through, err := jump.DialContext(ctx, "tcp", target)
	if err != nil {
		jump.Close()
		return nil, fmt.Errorf("through bastion %s: %w", bastion, err)
	}
	cl, err := handshake(through, target, conf)
	if err != nil {
		jump.Close()
		return nil, err
	}
	go func() { cl.Wait(); jump.Close() }()
	return cl, nil
}

func handshake(conn net.Conn, addr string, conf *ssh.ClientConfig) (*ssh.Client, error) {
	conn.SetDeadline(time.Now().Add(conf.Timeout))
	cc, chans, reqs, err := ssh.NewClientConn(conn, addr, conf)
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return ssh.NewClient(cc, chans, reqs), nil
}

// Shell is the command a script is fed to on its standard input: /bin/sh,
// as root (asRoot).
func (c *Client) Shell() string { return c.asRoot("/bin/sh -s") }

// asRoot is command run as root: as it is for root, through sudo -n
// (never a password prompt) for another user.
func (c *Client) asRoot(command string) string {
	if c.cfg.User == "root" {
		return command
	}
	return "sudo -n " + command
}

// RunScript runs script as root on the host at address and returns its
// standard output; its error carries the script's standard error.
func (c *Client) RunScript(ctx context.Context, address, script string) ([]byte, error) {
	return c.run(ctx, address, c.Shell(), strings.NewReader(script))
}

// run runs command on the host at address with stdin as its standard
// input and returns its standard output; its error carries its standard
// error, and names a sudo that wants a password. Cancelling ctx closes the
// connection.
func (c *Client) run(ctx context.Context, address, command string, stdin io.Reader) ([]byte, error) {
	cl, err := c.Dial(ctx, address)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	s, err := cl.NewSession()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var stdout, stderr bytes.Buffer
	s.Stdin, s.Stdout, s.Stderr = stdin, &stdout, &stderr
	done := make(chan error, 1)
	go func() { done <- s.Run(command) }()
	select {
	case <-ctx.Done():
		cl.Close()
		return nil, ctx.Err()
	case err = <-done:
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "sudo: a password is required") {
			return nil, fmt.Errorf("%s may not run commands as root without a password (sudo -n): allow it in /etc/sudoers.d, or log in as root", c.cfg.User)
		}
		if msg != "" {
			return stdout.Bytes(), fmt.Errorf("%w: %s", err, msg)
		}
		return stdout.Bytes(), err
	}
	return stdout.Bytes(), nil
}

func (c *Client) port() int {
	if c.cfg.Port == 0 {
		return 22
	}
	return c.cfg.Port
}

// hostOf and portOf split knownhosts' host argument ("h:p").
func hostOf(hostport string) string {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	return h
}

func portOf(hostport string) string {
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "22"
	}
	return p
}
