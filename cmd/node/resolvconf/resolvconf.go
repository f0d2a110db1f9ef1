// Package resolvconf points kubelet at the resolv.conf that names the
// host's real resolvers (`kiln node resolv-conf`, before kubelet starts).
// Pods with dnsPolicy Default, CoreDNS among them, get kubelet's
// resolvConf (/etc/resolv.conf unless set): on a host where
// systemd-resolved's stub is the only resolver there (nameserver
// 127.0.0.53), CoreDNS would forward every outside name to a loopback
// address of its own pod, where nothing answers. Like kubeadm, kiln then
// gives kubelet systemd-resolved's list of its upstreams instead
// (/run/systemd/resolve/resolv.conf), through a drop-in of kubelet's
// configuration directory, chosen again at every start of kubelet.
package resolvconf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms/resolvers"
)

// DropIn is the file, in kubelet's configuration directory, that sets
// resolvConf when kubelet's default would not do.
const DropIn = "20-kiln-resolv-conf.conf"

// Choose returns the resolv.conf for kubelet among files (the default,
// /etc/resolv.conf, first): the first naming a resolver, unless it names
// only loopback addresses and a later one names others (resolvers.ConfOf,
// which the API load balancer's DNS forwarder reads the host by too).
// It returns files[0] when none names a resolver.
func Choose(files []string, read func(string) ([]byte, error)) string {
	if f, _ := resolvers.ConfOf(files, read); f != "" {
		return f
	}
	return files[0]
}

// Apply writes, in kubelet's configuration directory dir, the drop-in
// setting resolvConf to file, or removes it when file is def (kubelet's
// default): the drop-in is replaced by a rename, never written through
// a link that stands in its place.
func Apply(dir, file, def string) error {
	path := filepath.Join(dir, DropIn)
	if file == def {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	content := fmt.Sprintf("# kiln node resolv-conf: %s names no resolver but loopback ones, which pods cannot reach.\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nresolvConf: %s\n", def, file)
	return atomicfile.Write(path, []byte(content), 0o644)
}
