package installconfig

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/graph"
)

// prompter asks questions on a line-oriented terminal.
type prompter struct {
	ctx context.Context
	r   *bufio.Reader
	w   io.Writer
}

// ask prints a question and reads answers until check accepts one; an
// empty answer is def.
func (p *prompter) ask(question, def string, check func(string) string) (string, error) {
	for {
		if err := p.ctx.Err(); err != nil {
			return "", err
		}
		if def != "" {
			fmt.Fprintf(p.w, "? %s [%s]: ", question, def)
		} else {
			fmt.Fprintf(p.w, "? %s: ", question)
		}
		line, err := p.r.ReadString('\n')
		if err != nil && (line == "" || !errors.Is(err, io.EOF)) {
			return "", &graph.InputError{Err: fmt.Errorf("survey ended before %q was answered", question)}
		}
		v := strings.TrimSpace(line)
		if v == "" {
			v = def
		}
		msg := check(v)
		if msg == "" {
			return v, nil
		}
		fmt.Fprintf(p.w, "  ✗ %s\n", msg)
	}
}

// survey asks for the fields without defaults and returns the config.
func survey(ctx context.Context, in Input) (*types.Config, error) {
	p := &prompter{ctx: ctx, r: bufio.NewReader(in.In), w: in.Out}
	names := configs.Names()
	platform, err := p.ask("Platform ("+strings.Join(names, ", ")+")", names[0], func(s string) string {
		if !slices.Contains(names, s) {
			return "choose one of " + strings.Join(names, ", ")
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	c := &types.Config{APIVersion: types.APIVersion}
	// Select the platform's section by its key, without naming platforms here.
	if err := json.Unmarshal([]byte(`{"`+platform+`":{}}`), &c.Platform); err != nil {
		return nil, err
	}
	if c.BaseDomain, err = p.ask("Base domain", "", func(s string) string {
		return strings.Join(validation.IsDNS1123Subdomain(s), "; ")
	}); err != nil {
		return nil, err
	}
	if c.Metadata.Name, err = p.ask("Cluster name", "", func(s string) string {
		if len(s) > MaxNameLength {
			return fmt.Sprintf("at most %d characters", MaxNameLength)
		}
		return strings.Join(validation.IsDNS1123Label(s), "; ")
	}); err != nil {
		return nil, err
	}
	if c.SSHKey, err = p.askSSHKey(in.HomeDir); err != nil {
		return nil, err
	}
	if c.PullSecret, err = p.askPullSecret(in.ReadSecret); err != nil {
		return nil, err
	}
	return c, nil
}

// askSSHKey offers the public keys in ~/.ssh by number, a path, or none.
func (p *prompter) askSSHKey(home string) (string, error) {
	var keys []string
	if home != "" {
		keys, _ = filepath.Glob(filepath.Join(home, ".ssh", "*.pub"))
	}
	for i, k := range keys {
		fmt.Fprintf(p.w, "  %d) %s\n", i+1, k)
	}
	def := "none"
	if len(keys) > 0 {
		def = "1"
	}
	var key string
	_, err := p.ask("SSH public key for the core user (number, path or none)", def, func(s string) string {
		if s == "none" {
			key = ""
			return ""
		}
		path := s
		if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= len(keys) {
			path = keys[n-1]
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err.Error()
		}
		if errs := validateSSHKey(string(data), field.NewPath("sshKey")); len(errs) > 0 {
			return path + ": not a public key"
		}
		key = strings.TrimSpace(string(data))
		return ""
	})
	return key, err
}

// askPullSecret reads the optional pull secret without echo.
func (p *prompter) askPullSecret(readSecret func() ([]byte, error)) (string, error) {
	for {
		fmt.Fprint(p.w, "? Pull secret (optional, input hidden, Enter to skip): ")
		var line string
		var err error
		if readSecret != nil {
			var b []byte
			b, err = readSecret()
			line = string(b)
			fmt.Fprintln(p.w)
		} else {
			line, err = p.r.ReadString('\n')
			if errors.Is(err, io.EOF) {
				err = nil
			}
		}
		if err != nil {
			return "", &graph.InputError{Err: fmt.Errorf("reading the pull secret: %w", err)}
		}
		s := strings.TrimSpace(line)
		if s == "" {
			return "", nil
		}
		errs := validatePullSecret(s, field.NewPath("pullSecret"))
		if len(errs) == 0 {
			return s, nil
		}
		fmt.Fprintf(p.w, "  ✗ %s\n", errs[0].ErrorBody())
	}
}
