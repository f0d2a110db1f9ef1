package password

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/kiln-project/kiln/graph"
)

// fakeFetcher is a graph.FileFetcher over an in-memory --dir.
type fakeFetcher map[string]string

func (f fakeFetcher) FetchByName(p string) (*graph.File, error) {
	data, ok := f[p]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	return &graph.File{Path: p, Data: []byte(data)}, nil
}

func (f fakeFetcher) FetchByPattern(string) ([]*graph.File, error) { return nil, errors.New("unused") }

func (f fakeFetcher) Names(string) ([]string, error) { return nil, errors.New("unused") }

var shape = regexp.MustCompile(`^[a-zA-Z2-9]{5}-[a-zA-Z2-9]{5}-[a-zA-Z2-9]{5}-[a-zA-Z2-9]{5}$`)

func TestGenerate(t *testing.T) {
	seen := map[string]bool{}
	for range 3 {
		var p KubeadminPassword
		if err := p.Generate(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		files := p.Files()
		if len(files) != 1 || files[0].Path != FileName || files[0].Mode != 0o600 {
			t.Fatalf("files %v, want only %s with mode 0600", files, FileName)
		}
		pw := string(files[0].Data)
		if len(pw) != 23 || !shape.MatchString(pw) {
			t.Errorf("password %q is not 4 dash-separated groups of 5", pw)
		}
		if seen[pw] {
			t.Errorf("password %q generated twice", pw)
		}
		seen[pw] = true
		if err := bcrypt.CompareHashAndPassword(p.PasswordHash, []byte(pw)); err != nil {
			t.Errorf("hash does not match the password: %v", err)
		}
		if cost, err := bcrypt.Cost(p.PasswordHash); err != nil || cost != generatedCost {
			t.Errorf("generated password hashed at cost %d (%v), want %d", cost, err, generatedCost)
		}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			if out := fmt.Sprintf(verb, &p); strings.Contains(out, pw) {
				t.Errorf("%s prints the password: %s", verb, out)
			}
		}
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name      string
		files     fakeFetcher
		wantFound bool
		wantPW    string
		wantErr   bool
	}{
		{"absent", fakeFetcher{}, false, "", false},
		{"user's password with newline", fakeFetcher{FileName: "correct horse battery\n"}, true, "correct horse battery", false},
		{"too short", fakeFetcher{FileName: "secret\n"}, true, "", true},
		{"too long for bcrypt", fakeFetcher{FileName: strings.Repeat("x", 73)}, true, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p KubeadminPassword
			found, err := p.Load(tt.files)
			if found != tt.wantFound {
				t.Errorf("found = %v, want %v", found, tt.wantFound)
			}
			if tt.wantErr {
				if graph.KindOf(err) != graph.KindInput || !strings.Contains(err.Error(), FileName) {
					t.Errorf("error %v, want an input error naming %s", err, FileName)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !found {
				return
			}
			if string(p.File.Data) != tt.wantPW || p.File.Mode != 0o600 {
				t.Errorf("file %q mode %o, want %q mode 0600", p.File.Data, p.File.Mode, tt.wantPW)
			}
			if err := bcrypt.CompareHashAndPassword(p.PasswordHash, []byte(tt.wantPW)); err != nil {
				t.Errorf("hash does not match: %v", err)
			}
			// A password a person chose keeps bcrypt's default work factor.
			if cost, err := bcrypt.Cost(p.PasswordHash); err != nil || cost != bcrypt.DefaultCost {
				t.Errorf("user's password hashed at cost %d (%v), want %d", cost, err, bcrypt.DefaultCost)
			}
		})
	}
}
