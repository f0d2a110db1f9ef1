package nodeimage

import (
	"context"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
)

// parts are the built inputs of the assembly.
type parts struct {
	// Bins maps each binary's name to its path in the component cache.
	Bins map[string]string
	// Base is the base tree's root directory.
	Base string
}

// buildParts builds whatever components and base tree are missing from
// the cache and returns them all. It runs three lanes, so that the
// CPU-bound Go builds overlap the steps that wait for the network and the
// disk:
//
//   - debootstrap of the base tree;
//   - the module downloads of every component to build, in build order
//     (prefetch: `go list -deps`, which downloads what the build will
//     read and compiles nothing);
//   - the `go build` of each component, one after another, each starting
//     once its modules are downloaded. One build at a time already keeps
//     every core busy (go build runs GOMAXPROCS compilers).
//
// The first error cancels the other lanes and is the one returned.
func (b *builder) buildParts(ctx context.Context) (*parts, error) {
	out := &parts{Bins: map[string]string{}}
	var jobs []componentJob
	for _, c := range Components(b.pinned()) {
		job, err := b.stageComponent(c)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, job)
		for _, n := range c.Binaries {
			out.Bins[n] = filepath.Join(job.Bin, n)
		}
	}
	base, err := b.stageBase()
	if err != nil {
		return nil, err
	}
	out.Base = base.rootfs()
	fetched := make([]chan struct{}, len(jobs))
	for i := range fetched {
		fetched[i] = make(chan struct{})
	}
	baseDone := make(chan struct{})
	var baseErr error // set before baseDone is closed
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(baseDone)
		if base.Mirror == "" {
			return nil
		}
		start := time.Now()
		baseErr = b.debootstrap(gctx, base, nil)
		if baseErr == nil {
			b.log.Infof("%s: done in %s, beside the component builds", base.title(), time.Since(start).Round(100*time.Millisecond))
		}
		return baseErr
	})
	g.Go(func() error {
		b.prefetch(gctx, jobs, fetched)
		return nil
	})
	g.Go(func() error {
		for i, job := range jobs {
			if job.Tmp == "" {
				continue
			}
			if err := b.buildComponent(gctx, job, fetched[i]); err != nil {
				return err
			}
		}
		select {
		case <-baseDone:
			return nil
		default:
		}
		// Only debootstrap is left: show that the build waits for it.
		end := b.progress.Start(base.title() + " (begun beside the component builds)")
		select {
		case <-baseDone:
			end(baseErr)
			return nil // the debootstrap lane returns baseErr
		case <-gctx.Done():
			end(gctx.Err())
			return gctx.Err()
		}
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// prefetch downloads the modules of each job that is not cached, in
// order, closing fetched[i] when job i's are in the module cache (or its
// download failed: the build then downloads them itself and reports the
// error). It returns when every channel is closed.
func (b *builder) prefetch(ctx context.Context, jobs []componentJob, fetched []chan struct{}) {
	for i, job := range jobs {
		if job.Tmp != "" && ctx.Err() == nil {
			if _, err := b.run.output(ctx, prefetchCmd(b.goBin, b.cache, job.Component, job.src()), true); err != nil {
				b.log.Debugf("downloading the modules of %s: %v", job.Name, err)
			}
		}
		close(fetched[i])
	}
}

// prefetchCmd returns the `go list` that loads c's packages in src, which
// downloads every module their build reads into the module cache, with the
// environment of the build, so that the build finds them there.
func prefetchCmd(goBin, cacheDir string, c Component, src string) Command {
	return Command{
		Path: goBin,
		Args: append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, c.Packages...),
		Env:  GoEnv(cacheDir, c.Cgo),
		Dir:  src,
	}
}
