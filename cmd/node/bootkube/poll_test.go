package bootkube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

func TestPollRetriesAndLogsEachNewMessageOnce(t *testing.T) {
	log, hook := test.NewNullLogger()
	results := []error{errNotYet("1 of 3 masters registered"), errNotYet("1 of 3 masters registered"),
		errors.New("connection refused"), nil}
	calls := 0
	err := poll(context.Background(), time.Millisecond, log, func() error {
		calls++
		return results[calls-1]
	})
	if err != nil || calls != len(results) {
		t.Fatalf("poll = %v after %d calls, want nil after %d", err, calls, len(results))
	}
	var got []string
	for _, e := range hook.AllEntries() {
		got = append(got, e.Level.String()+": "+e.Message)
	}
	want := []string{"info: 1 of 3 masters registered", "warning: connection refused"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("logged %q, want %q", got, want)
	}
}

func TestPollEndsWithContextNamingTheLastError(t *testing.T) {
	log, _ := test.NewNullLogger()
	log.SetLevel(logrus.PanicLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err := poll(ctx, time.Millisecond, log, func() error { return errNotYet("etcd member m-1 has not started yet") })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last error: etcd member m-1 has not started yet") {
		t.Errorf("poll = %v, want the deadline and the last error", err)
	}
}
