package scale

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
)

// HostsChange checks the platform.ssh.hosts of want, an edited copy of
// the install-config cur of a cluster on the ssh platform (with the hosts
// it runs on): a scale adds and removes master and worker hosts and
// changes nothing else. The bootstrap host's entry stays as it is (the
// host was reset after the install) but for joinAsWorker, which has it
// join or leave as a worker; a host that stays keeps its address
// and role (a host changing role leaves in one scale and comes back in
// the next); an address that stays keeps its host. Every problem is
// reported at once, under want's paths.
func HostsChange(cur, want *types.Config) field.ErrorList {
	if cur.Platform.SSH == nil || want.Platform.SSH == nil {
		return nil
	}
	fp := field.NewPath("platform", "ssh", "hosts")
	before := cur.Platform.SSH.Hosts
	var errs field.ErrorList
	for i, h := range want.Platform.SSH.Hosts {
		hp := fp.Index(i)
		j := slices.IndexFunc(before, func(b ssh.Host) bool { return b.Name == h.Name })
		k := slices.IndexFunc(before, func(b ssh.Host) bool { return b.Address == h.Address })
		switch {
		case h.Role == ssh.RoleBootstrap && (j < 0 || !sameBootstrap(before[j], h)):
			errs = append(errs, field.Invalid(hp, h.Name, "the bootstrap host's entry cannot change on a running cluster, but for joinAsWorker"))
		case j >= 0 && before[j].Role == ssh.RoleBootstrap && h.Role != ssh.RoleBootstrap:
			errs = append(errs, field.Invalid(hp.Child("role"), h.Role, "the bootstrap host's entry cannot change on a running cluster"))
		case j >= 0 && before[j].Address != h.Address:
			errs = append(errs, field.Invalid(hp.Child("address"), h.Address,
				fmt.Sprintf("host %s runs at %s: remove it in one scale and add it at its new address in the next", h.Name, before[j].Address)))
		case j >= 0 && before[j].Role != h.Role:
			errs = append(errs, field.Invalid(hp.Child("role"), h.Role,
				fmt.Sprintf("host %s runs as a %s: remove it in one scale and add it with its new role in the next", h.Name, before[j].Role)))
		case j < 0 && k >= 0:
			errs = append(errs, field.Invalid(hp.Child("name"), h.Name,
				fmt.Sprintf("%s is host %s's address: remove %s in one scale and add the new name in the next", h.Address, before[k].Name, before[k].Name)))
		}
	}
	return errs
}

// sameBootstrap reports whether a and b are the same bootstrap host's
// entry but for joinAsWorker: the one field of it a scale may change
// (the host, reset after the install, joins or leaves as a worker).
func sameBootstrap(a, b ssh.Host) bool {
	a.JoinAsWorker, b.JoinAsWorker = false, false
	return a == b
}

// unionHosts returns the hosts of want, then those of cur that want no
// longer lists: what the cluster runs on while a scale goes from one to
// the other. The bootstrap host joins as a worker in it when it does in
// either (it is a worker until the scale has reset it).
func unionHosts(cur, want []ssh.Host) []ssh.Host {
	out := slices.Clone(want)
	for _, h := range cur {
		i := slices.IndexFunc(out, func(w ssh.Host) bool { return w.Name == h.Name })
		switch {
		case i < 0:
			out = append(out, h)
		case h.Role == ssh.RoleBootstrap && out[i].Role == ssh.RoleBootstrap:
			out[i].JoinAsWorker = out[i].JoinAsWorker || h.JoinAsWorker
		}
	}
	return out
}
