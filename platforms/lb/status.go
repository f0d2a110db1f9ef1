package lb

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// Status is what the health checks of a running balancer last saw, as
// Serve writes it beside its configuration (StatusPath) for the waits to
// read.
type Status struct {
	// Services are the balancer's services, sorted by name.
	Services []ServiceStatus `json:"services"`
}

// ServiceStatus is the health of one service's backends.
type ServiceStatus struct {
	Name     string          `json:"name"`
	Backends []BackendStatus `json:"backends"`
}

// BackendStatus is one backend's health.
type BackendStatus struct {
	Addr    string `json:"addr"`
	Healthy bool   `json:"healthy"`
	// Reachable says its last check reached it (it timed out or answered
	// "not ready"): it still gets new connections while no backend of the
	// service is healthy.
	Reachable bool `json:"reachable,omitempty"`
	// Fails counts the checks it failed in a row.
	Fails int `json:"fails,omitempty"`
	// LastError is its last failed check's error.
	LastError string `json:"lastError,omitempty"`
}

// StatusPath is where the balancer configured by configPath writes its
// Status: lb.json's is lb-health.json.
func StatusPath(configPath string) string {
	return strings.TrimSuffix(configPath, ".json") + "-health.json"
}

// Status returns the health of every service's backends.
func (b *Balancer) Status() Status {
	b.mu.Lock()
	svcs := make([]*service, 0, len(b.services))
	for _, svc := range b.services {
		svcs = append(svcs, svc)
	}
	b.mu.Unlock()
	var st Status
	for _, svc := range svcs {
		ss := ServiceStatus{Name: svc.name}
		for _, be := range *svc.backends.Load() {
			bs := BackendStatus{Addr: be.addr, Healthy: be.healthy.Load(), Fails: int(be.fails.Load())}
			if !bs.Healthy {
				bs.Reachable = be.reachable.Load()
				if e := be.lastErr.Load(); e != nil {
					bs.LastError = *e
				}
			}
			ss.Backends = append(ss.Backends, bs)
		}
		st.Services = append(st.Services, ss)
	}
	slices.SortFunc(st.Services, func(a, b ServiceStatus) int { return strings.Compare(a.Name, b.Name) })
	return st
}

// statusWriter writes a balancer's Status to a file when it changed.
type statusWriter struct {
	path string
	last []byte
}

// write writes st unless it is what was written last.
func (w *statusWriter) write(st Status) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if string(data) == string(w.last) {
		return nil
	}
	if err := atomicfile.Write(w.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the health status: %w", err)
	}
	w.last = data
	return nil
}

// ReadStatus reads the Status a balancer wrote to path; a missing file
// is fs.ErrNotExist.
func ReadStatus(path string) (Status, error) {
	var st Status
	data, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// Problem describes, for a wait's state line, why service name of st
// serves no client: "" when one of its backends is healthy, or when st
// has no such service.
func (st Status) Problem(name string) string {
	for _, svc := range st.Services {
		if svc.Name != name {
			continue
		}
		var parts []string
		for _, be := range svc.Backends {
			if be.Healthy {
				return ""
			}
			p := be.Addr
			switch {
			case be.LastError != "":
				p += ": " + shortError(be.LastError)
			case be.Fails == 0:
				p += ": not checked yet"
			}
			if be.Reachable {
				p += " (still used: it accepts connections)"
			}
			parts = append(parts, p)
		}
		if len(parts) == 0 {
			return "no backend"
		}
		return "no backend passes its health check: " + strings.Join(parts, "; ")
	}
	return ""
}

// shortError drops the request from a health check's error: `Get
// "https://10.66.0.10:6443/readyz": context deadline exceeded` is
// `context deadline exceeded` after the backend's address.
func shortError(e string) string {
	if strings.HasPrefix(e, `Get "`) {
		if i := strings.Index(e, `": `); i > 0 {
			return e[i+3:]
		}
	}
	return e
}
