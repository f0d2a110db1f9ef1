package terraform

import "strings"

// engineEnv returns the environment of an engine process as a map: the
// parent's environment (environ, os.Environ() outside tests) without any
// variable that changes how Terraform or OpenTofu behaves (TF_*, TOFU_*,
// CHECKPOINT_DISABLE), plus CHECKPOINT_DISABLE=1 and, when cliConfig is not
// empty, kiln's CLI configuration file. TF_IN_AUTOMATION=1 is set by
// terraform-exec itself (it refuses to take it from SetEnv), so it is not
// here; commands kiln runs without terraform-exec add it (engineEnvList).
func engineEnv(environ []string, cliConfig string) map[string]string {
	env := make(map[string]string, len(environ)+3)
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || foreignEngineVar(k) {
			continue
		}
		env[k] = v
	}
	env["CHECKPOINT_DISABLE"] = "1"
	if cliConfig != "" {
		env["TF_CLI_CONFIG_FILE"] = cliConfig
		env["TOFU_CLI_CONFIG_FILE"] = cliConfig
	}
	return env
}

// foreignEngineVar reports whether the user's variable k must not reach an
// engine kiln runs: every TF_ and TOFU_ variable (TF_CLI_CONFIG_FILE,
// TF_PLUGIN_CACHE_DIR, TF_CLI_ARGS, TF_VAR_*, TF_DATA_DIR, TF_LOG...) and
// CHECKPOINT_DISABLE, which kiln sets itself.
func foreignEngineVar(k string) bool {
	return strings.HasPrefix(k, "TF_") || strings.HasPrefix(k, "TOFU_") || k == "CHECKPOINT_DISABLE"
}

// engineEnvList is engineEnv as a sorted KEY=VALUE list for exec.Cmd, with
// TF_IN_AUTOMATION=1.
func engineEnvList(environ []string, cliConfig string) []string {
	env := engineEnv(environ, cliConfig)
	env["TF_IN_AUTOMATION"] = "1"
	out := make([]string, 0, len(env))
	for _, k := range sortedKeys(env) {
		out = append(out, k+"="+env[k])
	}
	return out
}
