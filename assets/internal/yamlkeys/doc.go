// Package yamlkeys finds keys in YAML with their lines: keys set twice in
// one mapping (Find), and the values of keys of given names at any depth
// (Values). kiln decodes YAML through sigs.k8s.io/yaml, which keeps the last
// of duplicate keys without a word; a user who sets a field twice in
// install-config.yaml or in a manifest would get a cluster other than the
// one they read in the file. The YAML is parsed by go-yaml v3, whose node
// tree keeps each key's line.
package yamlkeys
