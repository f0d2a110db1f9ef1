package tls

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"time"
)

// caSpec is the certificate of a kiln CA named cn: self-signed, valid for
// CAValidity. A rotated CA has the same subject as the one it replaces.
func caSpec(cn string) certSpec {
	return certSpec{
		Subject:  pkix.Name{CommonName: cn, OrganizationalUnit: []string{"kiln"}},
		Usage:    usageCA,
		Validity: CAValidity,
	}
}

// RotatedCAIDs returns the IDs of the CAs `kiln certs rotate-ca` replaces:
// every CA of Assets. The service account key pair is not a CA and is kept.
func RotatedCAIDs() []string {
	return []string{(&RootCA{}).ID(), (&KubeletServingCA{}).ID(), (&EtcdCA{}).ID(), (&FrontProxyCA{}).ID()}
}

// NewCA issues a new key and self-signed certificate for the CA asset id
// (one of RotatedCAIDs), with the subject and lifetime kiln gives it.
func NewCA(ctx context.Context, alg Algorithm, id string) (CertKey, error) {
	cns := map[string]string{
		(&RootCA{}).ID():           rootCACN,
		(&KubeletServingCA{}).ID(): kubeletServingCACN,
		(&EtcdCA{}).ID():           etcdCACN,
		(&FrontProxyCA{}).ID():     frontProxyCACN,
	}
	cn, ok := cns[id]
	if !ok {
		return CertKey{}, fmt.Errorf("%s is not a CA kiln rotates", id)
	}
	return issue(ctx, alg, nil, caSpec(cn))
}

// IssueKubeletClient issues node's kubelet client certificate
// (CN=system:node:<node>, O=system:nodes: what kube-controller-manager signs
// after TLS bootstrapping) from ca, valid for validity.
func IssueKubeletClient(ctx context.Context, alg Algorithm, ca *CertKey, node string, validity time.Duration) (CertKey, error) {
	return issue(ctx, alg, ca, certSpec{
		Subject:  pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		Usage:    usageClient,
		Validity: validity,
	})
}
