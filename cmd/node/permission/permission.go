// Package permission waits, in one process, until credentials may do
// something: a joining node's kubelet starts only once its bootstrap token
// may create a CSR (`kiln node await-permission`). Asking once a second
// from a shell loop started kubectl once a second, a large Go binary whose
// start alone cost seconds of CPU on a slow host (a VM under emulation),
// on every joining node, while the temporary control plane came up beside
// them; one process asks over one connection.
package permission

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Attributes parses kubectl auth can-i's VERB RESOURCE[.GROUP] form
// ("create", "certificatesigningrequests.certificates.k8s.io").
func Attributes(verb, resource string) (authorizationv1.ResourceAttributes, error) {
	if verb == "" || resource == "" {
		return authorizationv1.ResourceAttributes{}, fmt.Errorf("want a verb and a resource, got %q %q", verb, resource)
	}
	r, group, _ := strings.Cut(resource, ".")
	return authorizationv1.ResourceAttributes{Verb: verb, Resource: r, Group: group}, nil
}

// Await asks the API server every interval, each request bounded by
// perTry, whether the client's credentials may do attrs, until they may
// (nil) or ctx ends (the last answer or error). A new reason for waiting
// is logged once.
func Await(ctx context.Context, c authorizationclient.SelfSubjectAccessReviewsGetter, attrs authorizationv1.ResourceAttributes,
	every, perTry time.Duration, log logrus.FieldLogger) error {
	why, said := "", ""
	err := wait.PollUntilContextCancel(ctx, every, true, func(ctx context.Context) (bool, error) {
		if why = ask(ctx, c, attrs, perTry); why != "" && why != said {
			log.Infof("waiting until %s %s is allowed: %s", attrs.Verb, resourceName(attrs), why)
			said = why
		}
		return why == "", nil
	})
	if err != nil {
		return fmt.Errorf("%s %s not allowed: %s", attrs.Verb, resourceName(attrs), why)
	}
	return nil
}

// ask returns "" when attrs are allowed, else why not.
func ask(ctx context.Context, c authorizationclient.SelfSubjectAccessReviewsGetter, attrs authorizationv1.ResourceAttributes, perTry time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, perTry)
	defer cancel()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
	got, err := c.SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	switch {
	case err != nil:
		return err.Error()
	case got.Status.Allowed:
		return ""
	case got.Status.Reason != "":
		return "denied: " + got.Status.Reason
	}
	return "denied"
}

// resourceName is attrs' resource as kubectl names it.
func resourceName(attrs authorizationv1.ResourceAttributes) string {
	if attrs.Group == "" {
		return attrs.Resource
	}
	return attrs.Resource + "." + attrs.Group
}
