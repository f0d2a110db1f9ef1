package permission

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestAttributes(t *testing.T) {
	a, err := Attributes("create", "certificatesigningrequests.certificates.k8s.io")
	if err != nil || a.Verb != "create" || a.Resource != "certificatesigningrequests" || a.Group != "certificates.k8s.io" {
		t.Errorf("Attributes = %+v, %v", a, err)
	}
	if a, err := Attributes("get", "pods"); err != nil || a.Resource != "pods" || a.Group != "" {
		t.Errorf("core group: %+v, %v", a, err)
	}
	if _, err := Attributes("", "pods"); err == nil {
		t.Error("no verb accepted")
	}
}

// Await asks until the answer is allowed: an unreachable API and a denial
// are waited out, each reason logged once, and the question asked is the
// one given.
func TestAwaitUntilAllowed(t *testing.T) {
	client := fake.NewClientset()
	answers := []func() (*authorizationv1.SelfSubjectAccessReview, error){
		func() (*authorizationv1.SelfSubjectAccessReview, error) { return nil, errors.New("connection refused") },
		func() (*authorizationv1.SelfSubjectAccessReview, error) { return nil, errors.New("connection refused") },
		func() (*authorizationv1.SelfSubjectAccessReview, error) {
			return &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Reason: "no RBAC yet"}}, nil
		},
		func() (*authorizationv1.SelfSubjectAccessReview, error) {
			return &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}, nil
		},
	}
	calls := 0
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		asked := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).Spec.ResourceAttributes
		if asked == nil || asked.Verb != "create" || asked.Resource != "certificatesigningrequests" || asked.Group != "certificates.k8s.io" {
			t.Errorf("asked %+v", asked)
		}
		ans := answers[min(calls, len(answers)-1)]
		calls++
		r, err := ans()
		return true, r, err
	})
	log, hook := logtest.NewNullLogger()
	attrs, _ := Attributes("create", "certificatesigningrequests.certificates.k8s.io")
	if err := Await(context.Background(), client.AuthorizationV1(), attrs, time.Millisecond, time.Second, log); err != nil {
		t.Fatalf("Await: %v", err)
	}
	if calls != 4 {
		t.Errorf("%d questions, want 4", calls)
	}
	var lines []string
	for _, e := range hook.AllEntries() {
		lines = append(lines, e.Message)
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "connection refused") || !strings.Contains(lines[1], "denied: no RBAC yet") {
		t.Errorf("logged %q, want the refusal and the denial once each", lines)
	}
}

// When ctx ends first, Await fails naming the question and the last answer.
func TestAwaitGivesUp(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authorizationv1.SelfSubjectAccessReview{}, nil
	})
	log := logrus.New()
	log.SetOutput(io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	attrs, _ := Attributes("create", "certificatesigningrequests.certificates.k8s.io")
	err := Await(ctx, client.AuthorizationV1(), attrs, time.Millisecond, time.Second, log)
	if err == nil || !strings.Contains(err.Error(), "create certificatesigningrequests.certificates.k8s.io not allowed: denied") {
		t.Errorf("err = %v", err)
	}
}
