package provision

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"

	"github.com/kiln-project/kiln/platforms"
)

var _ platforms.NodeShell = (*Provisioner)(nil)

// PutNodeFile implements platforms.NodeShell: path on node's host is
// replaced over SSH (remote.Client.PutFile), following no link.
func (p *Provisioner) PutNodeFile(ctx context.Context, c *platforms.Cluster, node, path string, src io.Reader, mode fs.FileMode) error {
	addr, err := hostAddress(c, node)
	if err != nil {
		return err
	}
	client, err := newClient(c.Config.Platform.SSH)
	if err != nil {
		return err
	}
	src, size, err := sized(src)
	if err != nil {
		return err
	}
	if err := client.PutFile(ctx, addr, path, src, size, mode); err != nil {
		return fmt.Errorf("host %s (%s): %w", node, addr, err)
	}
	return nil
}

// RunOnNode implements platforms.NodeShell: argv runs as root on node's
// host over SSH.
func (p *Provisioner) RunOnNode(ctx context.Context, c *platforms.Cluster, node string, argv ...string) ([]byte, error) {
	addr, err := hostAddress(c, node)
	if err != nil {
		return nil, err
	}
	client, err := newClient(c.Config.Platform.SSH)
	if err != nil {
		return nil, err
	}
	return hostRunner(client, map[string]string{node: addr})(ctx, node, argv...)
}

// hostAddress is the address of the host of c's node called node.
func hostAddress(c *platforms.Cluster, node string) (string, error) {
	for _, h := range clusterHosts(c) {
		if h.Name == node {
			return h.Address, nil
		}
	}
	return "", fmt.Errorf("%s is no node of cluster %s", node, c.InfraID)
}

// sized returns what src holds and how many bytes that is: what is left
// of a file or of a reader that knows its length, or else all of src read
// into memory.
func sized(src io.Reader) (io.Reader, int64, error) {
	switch s := src.(type) {
	case interface{ Len() int }:
		return src, int64(s.Len()), nil
	case io.Seeker:
		if st, ok := src.(interface{ Stat() (fs.FileInfo, error) }); ok {
			info, err := st.Stat()
			if err != nil {
				return nil, 0, err
			}
			at, err := s.Seek(0, io.SeekCurrent)
			if err != nil {
				return nil, 0, err
			}
			if info.Mode().IsRegular() {
				return src, info.Size() - at, nil
			}
		}
	}
	data, err := io.ReadAll(src)
	if err != nil {
		return nil, 0, err
	}
	return bytes.NewReader(data), int64(len(data)), nil
}
