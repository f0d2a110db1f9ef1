package scale

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/machineconfig"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// Join tokens: every machine a scale adds joins with a bootstrap token of
// its own, a new ID and secret, valid for the join timeout plus
// JoinTokenMargin (15 minutes by default), and labelled with
// the machine's name. Its full config carries the token, so the machine
// asks no machine-config server, and the install-time token (retired at
// install-complete) is never needed. The token's Secret is deleted as soon
// as the machine's Node has registered (its kubelet has its own client
// certificate then), and when the join fails. The token itself is recorded
// in --dir's shape record (0600) before the machine is created, so that a
// re-run after a failure or a kill makes the same token valid again for the
// machine that already carries it.
const (
	// JoinTokenMargin is how much longer than the join timeout a join token
	// is valid once (re-)created.
	JoinTokenMargin = 5 * time.Minute
	// JoinLabel marks a token Secret kiln created for a day-2 join; its
	// value is the joining machine's name.
	JoinLabel = "kiln.dev/join-node"
	// cleanupTimeout bounds the deletion of a token after a failed or
	// interrupted join.
	cleanupTimeout = 10 * time.Second
)

// startJoin makes the join token of machine name valid for the join (the
// recorded one, else a new one recorded first) and returns the role's full
// config presenting it, at release rel, in its pool's config.
func (r *Runner) startJoin(ctx context.Context, name, role string, rel release.Release) ([]byte, error) {
	tok, err := r.joinToken(name)
	if err != nil {
		return nil, err
	}
	if err := r.record(nil); err != nil {
		return nil, err
	}
	s := tok.Secret()
	s.Labels = map[string]string{JoinLabel: name}
	s.Data["description"] = []byte("kiln scale cluster: join token of " + name)
	err = r.step("Creating the join token of "+name+", valid until "+tok.Expiration.Local().Format(time.TimeOnly), func() error {
		secrets := r.Kube.CoreV1().Secrets(bootstraptoken.SecretNamespace)
		_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	cfg, err := joinConfig(r.Configs[role], tok.Token())
	if err == nil {
		cfg, err = withRelease(cfg, rel)
	}
	if err != nil {
		return nil, err
	}
	// The pools are named as the roles: the machine boots straight into
	// its pool's config.
	return machineconfig.WithPoolConfig(ctx, r.Kube.Discovery().RESTClient(), cfg, role)
}

// joinToken returns the recorded join token of name, valid for the join
// timeout plus JoinTokenMargin from now, or a new one it adds to the
// record.
func (r *Runner) joinToken(name string) (*bootstraptoken.BootstrapToken, error) {
	exp := r.now().Add(r.joinTimeout() + JoinTokenMargin)
	if t, ok := r.Joining[name]; ok {
		tok, err := bootstraptoken.Parse(t, exp)
		if err == nil {
			return tok, nil
		}
		r.Log.Warnf("the recorded join token of %s is unusable (%v): making a new one", name, err)
	}
	tok, err := bootstraptoken.New(exp)
	if err != nil {
		return nil, err
	}
	if r.Joining == nil {
		r.Joining = map[string]string{}
	}
	r.Joining[name] = tok.Token()
	return tok, nil
}

// joinTokenID returns the public ID of the join token recorded for name
// ("" when none is), for its inventory entry; never the secret.
func (r *Runner) joinTokenID(name string) string {
	id, _, ok := strings.Cut(r.Joining[name], ".")
	if !ok {
		return ""
	}
	return id
}

// endJoin deletes the join token of name once its Node registered, and
// drops it from the record.
func (r *Runner) endJoin(ctx context.Context, name string) error {
	if err := r.dropJoinToken(ctx, name); err != nil {
		return err
	}
	delete(r.Joining, name)
	return r.record(nil)
}

// joinFailed deletes the join token of name after err stopped its join,
// even when ctx was cancelled; the record keeps the token, so that a
// re-run makes it valid again for the machine that carries it.
func (r *Runner) joinFailed(ctx context.Context, name string, err error) error {
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if derr := r.dropJoinToken(cleanup, name); derr != nil {
		return errors.Join(err, fmt.Errorf("deleting the join token of %s: %w", name, derr))
	}
	return err
}

// dropJoinToken deletes the token Secrets labelled for name's join.
func (r *Runner) dropJoinToken(ctx context.Context, name string) error {
	secrets := r.Kube.CoreV1().Secrets(bootstraptoken.SecretNamespace)
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: JoinLabel + "=" + name})
	if err != nil {
		return err
	}
	for _, s := range list.Items {
		if s.Type != bootstraptoken.SecretType {
			continue
		}
		if err := secrets.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// joinConfig returns the full config full with its kubelet bootstrap
// kubeconfig presenting token instead of the install-time one.
func joinConfig(full []byte, token string) ([]byte, error) {
	cfg, err := ignition.Parse(full)
	if err != nil {
		return nil, fmt.Errorf("the full config in the state: %w", err)
	}
	raw, ok, err := ignition.FileContents(cfg, nodelayout.BootstrapKubeconfig)
	if err != nil || !ok {
		return nil, fmt.Errorf("the full config in the state has no kubelet bootstrap kubeconfig (%s): %v", nodelayout.BootstrapKubeconfig, err)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("kubelet bootstrap kubeconfig: %w", err)
	}
	for _, a := range kc.AuthInfos {
		a.Token = token
	}
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, err
	}
	ignition.AddFile(&cfg, nodelayout.BootstrapKubeconfig, 0o600, out)
	return ignition.Marshal(cfg)
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
