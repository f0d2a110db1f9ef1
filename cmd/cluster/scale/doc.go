// Package scale drives `kiln scale cluster`: it changes the masters and
// workers of a running cluster to a requested shape. MakePlan turns the
// request into an ordered plan of machine actions (printed like
// Terraform's: "+ worker-2", "- worker-0", "~ replace master-1"); Run
// carries the plan out step by step, each step idempotent, with intent
// recorded in --dir's shape record so that a re-run after an interrupt
// finishes what was begun. Masters change one at a time through etcd's
// learner path (package etcdmembers, which bootstrap uses too): a master
// is added as a learner, promoted once caught up, and put behind the load
// balancer only when its API server is ready; a master is removed from
// etcd before anything else of it goes.
package scale
