// Package types is the schema of install-config.yaml. It has no logic beyond
// small accessors. Each platform's sections are in a package of their own
// under it (types/local, types/none), which types.go imports.
//
// Package types and the packages under it are contracts (test/layering):
// they import nothing of kiln outside assets/installconfig/types and
// assets/release, so every other package (assets, platforms, commands)
// can stand on them.
// Besides the schema they hold each platform's defaults and validation
// (types/<platform>/<platform>config), the list of platforms and their
// contract (types/configs), and the naming of the cluster's machines
// (types/machines).
package types
