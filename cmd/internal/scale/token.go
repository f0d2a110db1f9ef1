package scale

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
)

// Join tokens: the configs that joining machines fetch carry the
// install-time bootstrap token, which the API stops accepting after 24 h
// (its Secret expires and the token cleaner deletes it).
const (
	// TokenMinLife is how long the token must still be valid for a join.
	TokenMinLife = 30 * time.Minute
	// TokenLife is the life of a token kiln makes valid again.
	TokenLife = time.Hour
	// MintedLabel marks a token Secret kiln created for a day-2 join; it is
	// deleted once the join is done.
	MintedLabel = "kiln.dev/day2-join"
)

// ensureToken makes the bootstrap token of the machines' configs valid for
// TokenMinLife at least: when its Secret is missing or expires sooner, kiln
// creates it again through the API with a TokenLife expiry. minted reports
// whether it did, so the caller deletes it after the join.
func (r *Runner) ensureToken(ctx context.Context) (minted bool, err error) {
	secrets := r.Kube.CoreV1().Secrets(bootstraptoken.SecretNamespace)
	want := r.Token.Secret()
	cur, err := secrets.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		exp, perr := time.Parse(time.RFC3339, string(cur.Data["expiration"]))
		if perr == nil && exp.Sub(r.now()) >= TokenMinLife {
			return cur.Labels[MintedLabel] != "", nil
		}
		if err := secrets.Delete(ctx, want.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("bootstrap token Secret: %w", err)
	}
	want.Data["expiration"] = []byte(r.now().Add(TokenLife).UTC().Format(time.RFC3339))
	want.Labels = map[string]string{MintedLabel: "true"}
	err = r.step("Making the join token valid for "+TokenLife.String(), func() error {
		_, err := secrets.Create(ctx, want, metav1.CreateOptions{})
		return err
	})
	return err == nil, err
}

// dropToken deletes the token Secret kiln made for a join.
func (r *Runner) dropToken(ctx context.Context) error {
	err := r.Kube.CoreV1().Secrets(bootstraptoken.SecretNamespace).Delete(ctx, r.Token.Secret().Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
