package sshconfig

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// MaxNTPServers is how many platform.ssh.ntpServers kiln accepts: an NTP
// client needs three or four to outvote one that is wrong.
const MaxNTPServers = 8

// validateNTPServers checks platform.ssh.ntpServers: each an IP address or
// a DNS name, not loopback or unspecified (every host would ask itself),
// none twice, at most MaxNTPServers.
func validateNTPServers(c *types.Config, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	servers := c.Platform.SSH.NTPServers
	if len(servers) > MaxNTPServers {
		errs = append(errs, field.TooMany(fp, len(servers), MaxNTPServers))
	}
	seen := map[string]int{}
	for i, s := range servers {
		ip := fp.Index(i)
		if a, err := netip.ParseAddr(s); err == nil {
			if a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() {
				errs = append(errs, field.Invalid(ip, s, "must be a time server every host reaches, not a loopback, unspecified or multicast address"))
				continue
			}
		} else if !isHost(s) {
			errs = append(errs, field.Invalid(ip, s, "must be an IP address or a DNS name"))
			continue
		}
		if j, dup := seen[s]; dup {
			errs = append(errs, field.Duplicate(ip, fmt.Sprintf("%s (also ntpServers[%d])", s, j)))
			continue
		}
		seen[s] = i
	}
	return errs
}
