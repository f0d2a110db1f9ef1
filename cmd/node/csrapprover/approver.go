package csrapprover

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certificatesv1listers "k8s.io/client-go/listers/certificates/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kiln-project/kiln/assets/manifests/inventory"
)

// Reasons of the Approved conditions the agent sets.
const (
	// ApprovalReason marks a kubelet serving certificate it approved.
	ApprovalReason = "KilnKubeletServingApprove"
	// NodeClientApprovalReason marks a node client certificate it approved
	// to a bootstrap token.
	NodeClientApprovalReason = "KilnNodeClientApprove"
)

// resync re-evaluates every CSR this often, in case the inventory changed
// without an event reaching the agent.
const resync = 10 * time.Minute

// approver holds the agent's state while it runs.
type approver struct {
	client   kubernetes.Interface
	csrs     certificatesv1listers.CertificateSigningRequestLister
	machines MachineSource
	nodes    NodeSource
	deny     DenyList
	queue    workqueue.TypedRateLimitingInterface[string]
	log      logrus.FieldLogger
	said     map[string]string // CSR name -> last reason logged for leaving it pending
	// done holds the CSRs approved, until the informer shows it: an update
	// event may still carry the pending copy, which must not be approved twice.
	done map[types.UID]bool
}

// Run approves kubelet serving CSRs that pass Decide, with deny, and node
// client CSRs of bootstrap tokens that pass DecideNodeClient, until ctx
// ends. It watches CSRs and the machine inventory (ConfigMap
// kube-system/kiln-machines, the only ConfigMap it may read: a CSR of a
// machine not in it yet, or made before the ConfigMap exists, is examined
// again when it changes) and processes one CSR at a time. Another approver
// may run beside it (the bootstrap machine's, until it is destroyed): a
// CSR the other approved first is left alone.
func Run(ctx context.Context, client kubernetes.Interface, deny DenyList, log logrus.FieldLogger) error {
	factory := informers.NewSharedInformerFactory(client, resync)
	csrInf := factory.Certificates().V1().CertificateSigningRequests()
	invFactory := informers.NewSharedInformerFactoryWithOptions(client, resync,
		informers.WithNamespace(inventory.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", inventory.Name).String()
		}))
	cmInf := invFactory.Core().V1().ConfigMaps()
	a := &approver{
		client:   client,
		csrs:     csrInf.Lister(),
		machines: ListerSource{Lister: cmInf.Lister()},
		nodes:    ClientNodes{Client: client},
		deny:     deny,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "kiln-csr-approver"}),
		log:  log,
		said: map[string]string{},
		done: map[types.UID]bool{},
	}
	defer a.queue.ShutDown()
	enqueue := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
			a.queue.Add(csr.Name)
		}
	}
	if _, err := csrInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, n any) { enqueue(n) },
		DeleteFunc: func(obj any) {
			if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
				a.queue.Add(csr.Name) // forgets what it said about it
			}
		},
	}); err != nil {
		return fmt.Errorf("watch CSRs: %w", err)
	}
	inventoryChanged := func(any) { a.enqueuePending() }
	if _, err := cmInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: inventoryChanged, UpdateFunc: func(_, n any) { inventoryChanged(n) }, DeleteFunc: inventoryChanged,
	}); err != nil {
		return fmt.Errorf("watch the machine inventory: %w", err)
	}
	for _, f := range []informers.SharedInformerFactory{factory, invFactory} {
		f.Start(ctx.Done())
		defer f.Shutdown()
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("cache of %v did not sync", typ)
			}
		}
	}
	log.Infof("approving %s CSRs for the names and addresses of kiln's machine inventory (ConfigMap %s/%s), "+
		"and %s CSRs of bootstrap tokens for the machines of the inventory each token may claim",
		certificatesv1.KubeletServingSignerName, inventory.Namespace, inventory.Name, certificatesv1.KubeAPIServerClientKubeletSignerName)
	go func() {
		<-ctx.Done()
		a.queue.ShutDown()
	}()
	for a.next(ctx) {
	}
	return nil
}

// enqueuePending queues every undecided kubelet serving and node client
// CSR.
func (a *approver) enqueuePending() {
	csrs, err := a.csrs.List(labels.Everything())
	if err != nil {
		return
	}
	for _, csr := range csrs {
		switch csr.Spec.SignerName {
		case certificatesv1.KubeletServingSignerName, certificatesv1.KubeAPIServerClientKubeletSignerName:
			if len(csr.Status.Conditions) == 0 {
				a.queue.Add(csr.Name)
			}
		}
	}
}

// ListerSource reads the machine inventory from a ConfigMap lister.
type ListerSource struct {
	// Lister lists ConfigMaps; only inventory.Namespace/inventory.Name is read.
	Lister corev1listers.ConfigMapLister
}

// Machines implements MachineSource.
func (s ListerSource) Machines() (*inventory.Inventory, error) {
	cm, err := s.Lister.ConfigMaps(inventory.Namespace).Get(inventory.Name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("no ConfigMap %s/%s", inventory.Namespace, inventory.Name)
	}
	if err != nil {
		return nil, err
	}
	return inventory.FromConfigMap(cm)
}

// next processes one queued CSR; false once the queue is shut down.
func (a *approver) next(ctx context.Context) bool {
	name, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(name)
	if err := a.sync(ctx, name); err != nil {
		a.log.Warnf("CSR %s: %v (will retry)", name, err)
		a.queue.AddRateLimited(name)
		return true
	}
	a.queue.Forget(name)
	return true
}

// sync decides one CSR and approves it when the rules allow.
func (a *approver) sync(ctx context.Context, name string) error {
	csr, err := a.csrs.Get(name)
	if apierrors.IsNotFound(err) {
		delete(a.said, name)
		return nil
	}
	if err != nil {
		return err
	}
	verdict, reason, err := a.decide(ctx, csr)
	if err != nil {
		return err
	}
	switch {
	case verdict == Ignore:
		delete(a.said, name)
		delete(a.done, csr.UID)
		return nil
	case a.done[csr.UID]:
		return nil
	case verdict == Pending:
		if a.said[name] != reason {
			a.said[name] = reason
			a.log.Warnf("leaving CSR %s of %s pending: %s", name, csr.Spec.Username, reason)
		}
		return nil
	}
	what, reason, message := "kubelet serving certificate", ApprovalReason,
		"kiln: kubelet serving certificate for the machine's own name and addresses in kiln's inventory"
	if csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName {
		what, reason, message = "node client certificate", NodeClientApprovalReason,
			"kiln: node client certificate for a machine of kiln's inventory that this bootstrap token may claim, not registered yet"
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type:           certificatesv1.CertificateApproved,
		Status:         corev1.ConditionTrue,
		Reason:         reason,
		Message:        message,
		LastUpdateTime: metav1.Now(),
	})
	_, err = a.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, csr, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// Changed since the cache saw it: most likely the other approver
		// approved it first. The change reaches the informer, which queues
		// the CSR again; then it is decided afresh.
		a.log.Debugf("CSR %s changed while being approved (approved by another approver?): looking at it again", name)
		return nil
	case err != nil:
		return fmt.Errorf("approve: %w", err)
	}
	delete(a.said, name)
	a.done[csr.UID] = true
	if req, err := parseRequest(csr.Spec.Request); err == nil {
		what += " of " + req.Subject.CommonName
	}
	a.log.Infof("approved CSR %s: %s, requested by %s", name, what, csr.Spec.Username)
	return nil
}

// decide applies the rules of the CSR's signer.
func (a *approver) decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (Verdict, string, error) {
	if csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName {
		return DecideNodeClient(ctx, csr, a.machines, a.nodes)
	}
	verdict, reason := Decide(csr, a.machines, a.deny)
	return verdict, reason, nil
}
