package etcdmembers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// versionTimeout bounds each member's answer to ClusterVersion.
const versionTimeout = dialTimeout

// ClusterVersion asks the members at endpoints (client URLs) for etcd's
// cluster version, "3.6.0": the version the leader set once every member
// ran it, which a member must at least run to start, and which decides
// the storage schema. The v3 API has no call for it; each member serves
// it on its client URL's /version, as etcdctl's endpoint status does not.
// The first member that answers decides; the error names every one that
// did not.
func ClusterVersion(ctx context.Context, hc *http.Client, endpoints []string) (string, error) {
	var errs []error
	for _, ep := range endpoints {
		v, err := clusterVersionOf(ctx, hc, ep)
		if err == nil {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", ep, err))
	}
	if len(errs) == 0 {
		return "", errors.New("no etcd endpoint to ask")
	}
	return "", errors.Join(errs...)
}

// clusterVersionOf is one member's answer to ClusterVersion.
func clusterVersionOf(ctx context.Context, hc *http.Client, endpoint string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/version", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/version: %s", resp.Status)
	}
	var v struct {
		Server  string `json:"etcdserver"`
		Cluster string `json:"etcdcluster"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return "", fmt.Errorf("/version: %w", err)
	}
	if v.Cluster == "" || v.Cluster == "not_decided" {
		return "", fmt.Errorf("etcd %s has no cluster version yet", v.Server)
	}
	return v.Cluster, nil
}
