package etcdmembers

import (
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// PeerURL is the peer URL of the member on the machine at ip.
func PeerURL(ip string) string { return "https://" + net.JoinHostPort(ip, "2380") }

// ClientURL is the client URL of the member on the machine at ip.
func ClientURL(ip string) string { return "https://" + net.JoinHostPort(ip, "2379") }

// ByName returns the member of ms named name, or nil.
func ByName(ms []*etcdserverpb.Member, name string) *etcdserverpb.Member {
	for _, m := range ms {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// byPeerURL returns the member of ms with peer URL url, or nil.
func byPeerURL(ms []*etcdserverpb.Member, url string) *etcdserverpb.Member {
	for _, m := range ms {
		if slices.Contains(m.PeerURLs, url) {
			return m
		}
	}
	return nil
}

// learner returns the first learner of ms, or nil: etcd takes one learner
// at a time.
func learner(ms []*etcdserverpb.Member) *etcdserverpb.Member {
	for _, m := range ms {
		if m.IsLearner {
			return m
		}
	}
	return nil
}

// nameOf is m's name, or its ID for a member that has not started (a
// learner has no name until then).
func nameOf(m *etcdserverpb.Member) string {
	if m.Name != "" {
		return m.Name
	}
	return strconv.FormatUint(m.ID, 16)
}

// initialCluster is the --initial-cluster value for the member with ID
// newID and name newName joining members.
func initialCluster(members []*etcdserverpb.Member, newID uint64, newName string) string {
	var parts []string
	for _, m := range members {
		name := m.Name
		if m.ID == newID {
			name = newName
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, name+"="+u)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
