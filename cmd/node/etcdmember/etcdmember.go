// Package etcdmember is the on-node side of an etcd member's install: the
// etcd installer pod on a master runs Install (`kiln node etcd-install`),
// and the bootstrap machine writes its own member's certificates with
// WriteFiles at first boot. Issuing the certificates and changing the
// membership is package etcdmembers' work.
package etcdmember

import (
	"os"
	"path/filepath"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// WriteFiles writes files into dir atomically; names ending in .key are 0600.
func WriteFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		mode := os.FileMode(0o644)
		if filepath.Ext(name) == ".key" {
			mode = 0o600
		}
		if err := atomicfile.Write(filepath.Join(dir, name), data, mode); err != nil {
			return err
		}
	}
	return nil
}
