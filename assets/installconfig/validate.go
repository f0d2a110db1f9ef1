package installconfig

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/release"
)

// MaxNameLength bounds metadata.name so the infra ID (<name>-<5 random>)
// keeps the whole name and the machine host names built from it
// (<infraID>-master-0) stay within a 63-character DNS label.
const MaxNameLength = 27

// controlPlaneSizes are the etcd member counts kiln accepts: odd, so a
// quorum survives (3 - 1) / 2 = 1 or (5 - 1) / 2 = 2 losses; 1 is for
// development clusters without high availability.
var controlPlaneSizes = []int64{1, 3, 5}

// Validate checks a defaulted install-config and returns every problem at
// once; plats are the platforms kiln implements.
func Validate(c *types.Config, plats []configs.Platform) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.APIVersion == "":
		errs = append(errs, field.Required(field.NewPath("apiVersion"), "must be "+types.APIVersion))
	case c.APIVersion != types.APIVersion:
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{types.APIVersion}))
	}
	errs = append(errs, validateNames(c)...)
	errs = append(errs, validatePools(c)...)
	if !slices.Contains(types.HardwareSpeeds(), c.ControlPlaneHardwareSpeed) {
		errs = append(errs, field.NotSupported(field.NewPath("controlPlaneHardwareSpeed"), c.ControlPlaneHardwareSpeed, types.HardwareSpeeds()))
	}
	if _, err := release.Lookup(c.KubernetesVersion); err != nil {
		errs = append(errs, field.NotSupported(field.NewPath("kubernetesVersion"), c.KubernetesVersion, release.Versions()))
	}
	errs = append(errs, validateNetworking(c)...)
	errs = append(errs, validatePlatform(c, plats)...)
	errs = append(errs, validateNodeAccess(c)...)
	errs = append(errs, validateTimeouts(c.Timeouts, field.NewPath("timeouts"))...)
	errs = append(errs, validatePKI(c.PKI, field.NewPath("pki"))...)
	errs = append(errs, validateBackup(c.Backup, field.NewPath("backup"))...)
	return errs
}

func validateNames(c *types.Config) field.ErrorList {
	var errs field.ErrorList
	name := field.NewPath("metadata", "name")
	switch {
	case c.Metadata.Name == "":
		errs = append(errs, field.Required(name, "the cluster name, a DNS label such as \"dev\""))
	case len(c.Metadata.Name) > MaxNameLength:
		errs = append(errs, field.TooLong(name, c.Metadata.Name, MaxNameLength))
	default:
		for _, msg := range validation.IsDNS1123Label(c.Metadata.Name) {
			errs = append(errs, field.Invalid(name, c.Metadata.Name, msg))
		}
	}
	bd := field.NewPath("baseDomain")
	if c.BaseDomain == "" {
		return append(errs, field.Required(bd, "the DNS domain the cluster lives under, such as \"example.com\""))
	}
	for _, msg := range validation.IsDNS1123Subdomain(c.BaseDomain) {
		errs = append(errs, field.Invalid(bd, c.BaseDomain, msg))
	}
	if n := len(c.APIIntName()); n > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, field.Invalid(bd, c.BaseDomain,
			fmt.Sprintf("%s is %d characters, more than %d", c.APIIntName(), n, validation.DNS1123SubdomainMaxLength)))
	}
	return errs
}

func validatePools(c *types.Config) field.ErrorList {
	var errs field.ErrorList
	cp := field.NewPath("controlPlane")
	if c.ControlPlane == nil {
		return append(errs, field.Required(cp, ""))
	}
	if c.ControlPlane.Name != ControlPlanePoolName {
		errs = append(errs, field.NotSupported(cp.Child("name"), c.ControlPlane.Name, []string{ControlPlanePoolName}))
	}
	if r := c.ControlPlane.Replicas; r == nil || !slices.Contains(controlPlaneSizes, *r) {
		var v any = field.OmitValueType{}
		if r != nil {
			v = *r
		}
		errs = append(errs, field.Invalid(cp.Child("replicas"), v,
			"must be 1, 3 or 5: etcd needs an odd number of members for a quorum"))
	}
	errs = append(errs, validatePoolPlatform(c, &c.ControlPlane.Platform, cp.Child("platform"))...)
	seen := map[string]bool{}
	for i := range c.Compute {
		p, pp := &c.Compute[i], field.NewPath("compute").Index(i)
		switch {
		case p.Name != ComputePoolName:
			errs = append(errs, field.NotSupported(pp.Child("name"), p.Name, []string{ComputePoolName}))
		case seen[p.Name]:
			errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
		}
		seen[p.Name] = true
		if p.Replicas == nil || *p.Replicas < 0 {
			var v any = field.OmitValueType{}
			if p.Replicas != nil {
				v = *p.Replicas
			}
			errs = append(errs, field.Invalid(pp.Child("replicas"), v, "must be 0 or more"))
		}
		errs = append(errs, validatePoolPlatform(c, &p.Platform, pp.Child("platform"))...)
	}
	return errs
}

// validatePoolPlatform rejects a pool's section for a platform that is not
// the selected one; the selected platform validates its own section.
func validatePoolPlatform(c *types.Config, p *types.MachinePoolPlatform, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range p.Names() {
		if name != c.PlatformName() {
			errs = append(errs, field.Forbidden(fp.Child(name), "platform."+name+" is not the selected platform"))
		}
	}
	return errs
}

func validatePlatform(c *types.Config, plats []configs.Platform) field.ErrorList {
	fp := field.NewPath("platform")
	supported := make([]string, len(plats))
	for i, p := range plats {
		supported[i] = p.Name()
	}
	names := c.Platform.Names()
	switch len(names) {
	case 0:
		return field.ErrorList{field.Required(fp, "set exactly one of: "+strings.Join(supported, ", "))}
	case 1:
	default:
		return field.ErrorList{field.Invalid(fp, strings.Join(names, ", "), "set exactly one platform")}
	}
	p := lookup(plats, names[0])
	if p == nil {
		return field.ErrorList{field.NotSupported(fp, names[0], supported)}
	}
	return p.Validate(c, fp.Child(names[0]))
}

func validatePKI(p *types.PKI, fp *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	leaf := types.DefaultLeafValidity
	if p.LeafValidity != "" {
		lp := fp.Child("leafValidity")
		v, err := time.ParseDuration(p.LeafValidity)
		if err != nil {
			return field.ErrorList{field.Invalid(lp, p.LeafValidity, "must be a duration such as \"2160h\" (90 days)")}
		}
		least, why := types.MinLeafValidity, " (7 days): a shorter lifetime leaves too little time to renew; tests that watch certificates expire set pki.allowShortLeafValidityForTests"
		if p.AllowShortLeafValidityForTests {
			least, why = types.MinTestLeafValidity, " with pki.allowShortLeafValidityForTests"
		}
		switch {
		case v < least:
			errs = append(errs, field.Invalid(lp, p.LeafValidity, "must be at least "+least.String()+why))
		case v > types.DefaultLeafValidity:
			errs = append(errs, field.Invalid(lp, p.LeafValidity, "must be at most 8760h (1 year): kiln checks that a CA outlives its leaves by that much"))
		}
		leaf = v
	}
	switch p.Renewal {
	case "", types.RenewalAutomatic, types.RenewalManual:
	default:
		errs = append(errs, field.NotSupported(fp.Child("renewal"), p.Renewal, []string{types.RenewalAutomatic, types.RenewalManual}))
	}
	if p.RenewBefore != "" {
		errs = append(errs, validateRenewBefore(p, leaf, fp.Child("renewBefore"))...)
	}
	return errs
}

// validateRenewBefore checks pki.renewBefore against the lifetime leaf:
// renewing more often than every half lifetime (or, in tests, at once
// again) would restart the control plane over and over.
func validateRenewBefore(p *types.PKI, leaf time.Duration, fp *field.Path) field.ErrorList {
	v, err := time.ParseDuration(p.RenewBefore)
	if err != nil {
		return field.ErrorList{field.Invalid(fp, p.RenewBefore, "must be a duration such as \"720h\" (30 days)")}
	}
	least, most, why := types.MinRenewBefore, leaf/2, "half of pki.leafValidity ("+leaf.String()+"): renewals would follow each other too closely"
	if p.AllowShortLeafValidityForTests {
		least, most, why = types.MinTestRenewBefore, leaf-types.MinTestRenewBefore, "pki.leafValidity less "+types.MinTestRenewBefore.String()+" with pki.allowShortLeafValidityForTests"
	}
	switch {
	case p.Renewal == types.RenewalManual:
		return field.ErrorList{field.Invalid(fp, p.RenewBefore, "only pki.renewal Automatic renews on the masters; with Manual, run `kiln certs renew`")}
	case v < least:
		return field.ErrorList{field.Invalid(fp, p.RenewBefore, "must be at least "+least.String())}
	case v > most:
		return field.ErrorList{field.Invalid(fp, p.RenewBefore, "must be at most "+most.String()+": "+why)}
	}
	return nil
}

func validateBackup(b *types.Backup, fp *field.Path) field.ErrorList {
	if b == nil {
		return nil
	}
	var errs field.ErrorList
	switch _, err := cron.ParseStandard(b.Schedule); {
	case b.Schedule == "":
		errs = append(errs, field.Required(fp.Child("schedule"), "when the cluster takes a backup, in cron's five fields, e.g. \"0 3 * * *\""))
	case strings.Contains(b.Schedule, "TZ"):
		errs = append(errs, field.Invalid(fp.Child("schedule"), b.Schedule, "takes no time zone: it is UTC"))
	case err != nil:
		errs = append(errs, field.Invalid(fp.Child("schedule"), b.Schedule, "must be cron's five fields (minute hour day-of-month month day-of-week), e.g. \"0 3 * * *\": "+err.Error()))
	}
	if b.Keep < 0 || b.Keep > types.MaxBackupKeep {
		errs = append(errs, field.Invalid(fp.Child("keep"), b.Keep, fmt.Sprintf("must be between 1 and %d (0 or unset: %d)", types.MaxBackupKeep, types.DefaultBackupKeep)))
	}
	for i, r := range b.EncryptTo {
		if _, err := age.ParseX25519Recipient(r); err != nil {
			// The value is not echoed: it may be a private key put
			// here by mistake.
			errs = append(errs, field.Invalid(fp.Child("encryptTo").Index(i), "(not shown)", "must be an age public key, \"age1...\" (kiln backup keygen prints one)"))
		}
	}
	return errs
}

func validateTimeouts(t *types.Timeouts, fp *field.Path) field.ErrorList {
	if t == nil {
		return nil
	}
	var errs field.ErrorList
	for _, d := range []struct {
		name, value string
	}{{"bootstrap", t.Bootstrap}, {"install", t.Install}, {"api", t.API}} {
		if d.value == "" {
			continue
		}
		v, err := time.ParseDuration(d.value)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(fp.Child(d.name), d.value, "must be a duration such as \"30m\" or \"1h30m\""))
		case v <= 0:
			errs = append(errs, field.Invalid(fp.Child(d.name), d.value, "must be positive"))
		}
	}
	return errs
}
