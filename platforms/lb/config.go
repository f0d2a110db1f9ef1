package lb

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// Health check kinds.
const (
	// CheckHTTPS is an HTTPS GET of Service.HealthPath that must answer 200.
	CheckHTTPS = "https"
	// CheckTCP is a TCP connect.
	CheckTCP = "tcp"
)

// DefaultInterval is the health-check interval when a service sets none.
const DefaultInterval = 2 * time.Second

// Config is the load balancer's JSON configuration file.
type Config struct {
	// Listen is the address the services listen on (the API VIP).
	Listen string `json:"listen"`
	// Services are the balanced ports.
	Services []Service `json:"services"`
	// DNS, when set, forwards DNS queries on Listen to the host's
	// resolvers (dns.go).
	DNS *DNS `json:"dns,omitempty"`
}

// Service is one balanced port.
type Service struct {
	// Name names the service in logs ("api", "machine-config").
	Name string `json:"name"`
	// Port is the port listened on; backends use it too unless they name a
	// port. 0 picks a free port (tests).
	Port int `json:"port"`
	// Backends are "ip" or "ip:port" addresses.
	Backends []string `json:"backends"`
	// Health is CheckHTTPS or CheckTCP.
	Health string `json:"health"`
	// HealthPath is the HTTPS path checked (CheckHTTPS), e.g. "/readyz".
	HealthPath string `json:"healthPath,omitempty"`
	// CAFile is a PEM bundle the HTTPS check verifies backends with; without
	// it the check does not verify certificates (it sends no secret and only
	// decides where connections go; proxied traffic is end-to-end TLS).
	CAFile string `json:"caFile,omitempty"`
	// IntervalMillis is the health-check interval; DefaultInterval when 0.
	IntervalMillis int `json:"intervalMillis,omitempty"`
	// IdleTimeoutMillis closes a proxied connection, both ways, once
	// neither direction has moved a byte for this long; 0 never does (the
	// API load balancer: a quiet watch is no reason to cut it).
	IdleTimeoutMillis int `json:"idleTimeoutMillis,omitempty"`
	// MaxConns caps the connections this port proxies at once: past it a
	// new connection is reset as soon as it is accepted, and a warning says
	// so at most once per minute; 0 sets no cap.
	MaxConns int `json:"maxConns,omitempty"`
}

// idleTimeout returns the service's idle timeout; 0 is none.
func (s Service) idleTimeout() time.Duration {
	return time.Duration(s.IdleTimeoutMillis) * time.Millisecond
}

// interval returns the service's health-check interval.
func (s Service) interval() time.Duration {
	if s.IntervalMillis > 0 {
		return time.Duration(s.IntervalMillis) * time.Millisecond
	}
	return DefaultInterval
}

// listenAddr returns the service's listen address.
func (s Service) listenAddr(listen string) string {
	return net.JoinHostPort(listen, strconv.Itoa(s.Port))
}

// backendAddrs returns the backends as host:port.
func (s Service) backendAddrs() []string { return withPort(s.Backends, s.Port) }

// withPort returns addrs, each "ip" or "ip:port", as ip:port, port where
// they name none.
func withPort(addrs []string, port int) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err == nil {
			out = append(out, a)
			continue
		}
		out = append(out, net.JoinHostPort(a, strconv.Itoa(port)))
	}
	return out
}

// checkAddrs returns an error for each of addrs, "ip" or "ip:port", that
// holds no IP address, naming it as field[i].
func checkAddrs(field string, addrs []string) []error {
	var errs []error
	for i, a := range addrs {
		host := a
		if h, _, err := net.SplitHostPort(a); err == nil {
			host = h
		}
		if net.ParseIP(host) == nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %q is not an IP address", field, i, a))
		}
	}
	return errs
}

// Validate checks the configuration and returns every problem found.
func (c *Config) Validate() error {
	var errs []error
	if net.ParseIP(c.Listen) == nil {
		errs = append(errs, fmt.Errorf("listen: %q is not an IP address", c.Listen))
	}
	if d := c.DNS; d != nil {
		if d.Port < 0 || d.Port > 65535 {
			errs = append(errs, fmt.Errorf("dns.port: %d out of range", d.Port))
		}
		errs = append(errs, checkAddrs("dns.upstreams", d.Upstreams)...)
	}
	seen := map[int]bool{}
	for i, s := range c.Services {
		p := fmt.Sprintf("services[%d]", i)
		if s.Port < 0 || s.Port > 65535 {
			errs = append(errs, fmt.Errorf("%s.port: %d out of range", p, s.Port))
		}
		if s.Port != 0 && seen[s.Port] {
			errs = append(errs, fmt.Errorf("%s.port: %d used twice", p, s.Port))
		}
		seen[s.Port] = true
		if s.IdleTimeoutMillis < 0 {
			errs = append(errs, fmt.Errorf("%s.idleTimeoutMillis: %d is negative (0 is no timeout)", p, s.IdleTimeoutMillis))
		}
		if s.MaxConns < 0 {
			errs = append(errs, fmt.Errorf("%s.maxConns: %d is negative (0 is no cap)", p, s.MaxConns))
		}
		switch s.Health {
		case CheckTCP:
		case CheckHTTPS:
			if s.HealthPath == "" {
				errs = append(errs, fmt.Errorf("%s.healthPath: required for %s checks", p, CheckHTTPS))
			}
		default:
			errs = append(errs, fmt.Errorf("%s.health: %q is not %s or %s", p, s.Health, CheckHTTPS, CheckTCP))
		}
		errs = append(errs, checkAddrs(p+".backends", s.Backends)...)
	}
	return errors.Join(errs...)
}

// LoadConfig reads and validates a configuration file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}
