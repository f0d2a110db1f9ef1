package installconfig

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// validateNodeAccess checks what the nodes are given: the SSH key, the pull
// secret, extra trusted CAs and the proxy.
func validateNodeAccess(c *types.Config) field.ErrorList {
	var errs field.ErrorList
	if c.SSHKey != "" {
		errs = append(errs, validateSSHKey(c.SSHKey, field.NewPath("sshKey"))...)
	}
	if c.PullSecret != "" {
		errs = append(errs, validatePullSecret(c.PullSecret, field.NewPath("pullSecret"))...)
	}
	if c.AdditionalTrustBundle != "" {
		errs = append(errs, validateTrustBundle(c.AdditionalTrustBundle, field.NewPath("additionalTrustBundle"))...)
	}
	if c.Proxy != nil {
		errs = append(errs, validateProxy(c.Proxy, field.NewPath("proxy"))...)
	}
	return append(errs, validateImageMirrors(c.ImageMirrors, field.NewPath("imageMirrors"))...)
}

// registryRE is a registry host as image names give it: DNS labels joined
// by dots, with an optional port.
var registryRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(:[0-9]{1,5})?$`)

// repositoryRE is a path prefix of repositories.
var repositoryRE = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)

// validateImageMirrors checks each source is a registry given once and
// each mirror a registry with an optional path prefix.
func validateImageMirrors(ms []types.ImageMirror, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, m := range ms {
		mp := p.Index(i)
		switch {
		case !registryRE.MatchString(m.Source):
			errs = append(errs, field.Invalid(mp.Child("source"), m.Source, "must be a registry host as image names give it, e.g. docker.io or registry.example.com:5000, without a scheme or path"))
		case seen[m.Source]:
			errs = append(errs, field.Duplicate(mp.Child("source"), m.Source))
		}
		seen[m.Source] = true
		if len(m.Mirrors) == 0 {
			errs = append(errs, field.Required(mp.Child("mirrors"), "at least one mirror"))
		}
		for j, mirror := range m.Mirrors {
			host, path, _ := strings.Cut(mirror, "/")
			if !registryRE.MatchString(host) || strings.Contains(mirror, "/") && !repositoryRE.MatchString(path) {
				errs = append(errs, field.Invalid(mp.Child("mirrors").Index(j), mirror, "must be a registry host with an optional port and path prefix, e.g. mirror.example.com/dockerhub, without a scheme"))
			}
		}
	}
	return errs
}

// validateSSHKey accepts one or more authorized_keys lines.
func validateSSHKey(s string, p *field.Path) field.ErrorList {
	rest := []byte(s)
	for len(bytes.TrimSpace(rest)) > 0 {
		var err error
		if _, _, _, rest, err = ssh.ParseAuthorizedKey(rest); err != nil {
			return field.ErrorList{field.Invalid(p, abbreviate(s), "must be a public key in authorized_keys format: "+err.Error())}
		}
	}
	return nil
}

// validatePullSecret checks the JSON shape; the value is a secret and never
// appears in an error.
func validatePullSecret(s string, p *field.Path) field.ErrorList {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must be a JSON object such as {\"auths\": {...}}")}
	}
	var auths map[string]json.RawMessage
	if raw, ok := doc["auths"]; !ok || json.Unmarshal(raw, &auths) != nil {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must have an \"auths\" object")}
	}
	return nil
}

// validateTrustBundle accepts one or more PEM CERTIFICATE blocks and nothing else.
func validateTrustBundle(s string, p *field.Path) field.ErrorList {
	rest := []byte(s)
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			return field.ErrorList{field.Invalid(p, block.Type, "holds a PEM block that is not a CERTIFICATE")}
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "certificate "+strconv.Itoa(n)+": "+err.Error())}
		}
	}
	if n == 0 || len(bytes.TrimSpace(rest)) > 0 {
		return field.ErrorList{field.Invalid(p, abbreviate(s), "must be PEM-encoded certificates only")}
	}
	return nil
}

func validateProxy(px *types.Proxy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct{ name, value string }{{"httpProxy", px.HTTPProxy}, {"httpsProxy", px.HTTPSProxy}} {
		if f.value == "" {
			continue
		}
		u, err := url.Parse(f.value)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child(f.name), field.OmitValueType{}, "must be a URL such as http://proxy:3128"))
			continue
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(p.Child(f.name), u.Redacted(), "must be an http:// or https:// URL with a host"))
		}
	}
	if px.NoProxy != "" {
		for _, e := range strings.Split(px.NoProxy, ",") {
			if msg := noProxyEntry(strings.TrimSpace(e)); msg != "" {
				errs = append(errs, field.Invalid(p.Child("noProxy"), e, msg))
			}
		}
	}
	return errs
}

// noProxyEntry returns why e is not a valid noProxy entry, or "".
func noProxyEntry(e string) string {
	if e == "*" {
		return ""
	}
	if e == "" {
		return "has an empty entry"
	}
	if _, err := netip.ParseAddr(e); err == nil {
		return ""
	}
	if _, err := netip.ParsePrefix(e); err == nil {
		return ""
	}
	if len(validation.IsDNS1123Subdomain(strings.ToLower(strings.TrimPrefix(e, ".")))) == 0 {
		return ""
	}
	return "entries must be \"*\", IP addresses, CIDR blocks or domains (a leading \".\" matches subdomains)"
}

// abbreviate shortens a long value for an error message.
func abbreviate(s string) string {
	const n = 40
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
