//go:build deps

// Package deps pins the modules kiln is built from before code imports them; removed once everything is used.
package deps

import (
	_ "github.com/coreos/butane/config"
	_ "github.com/coreos/ignition/v2/config/v3_3/types"
	_ "github.com/coreos/ignition/v2/config/validate"
	_ "github.com/hashicorp/terraform-exec/tfexec"
	_ "github.com/hashicorp/terraform-plugin-framework/providerserver"
	_ "github.com/hashicorp/terraform-plugin-go/tfprotov6"
	_ "github.com/sirupsen/logrus"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/crypto/bcrypt"
	_ "golang.org/x/term"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "sigs.k8s.io/yaml"
	_ "golang.org/x/sync/errgroup"
	_ "go.etcd.io/etcd/client/v3"
)
