// Package podtemplates reads what a scale target's pod template says, once
// per change of the target: its labels (for the check that the Service
// selects the target's pods, package refusals), one replica's resource
// requests (package ledger) and what the target reports of creating its
// pods (package fallback). The target's resourceVersion, read from the
// metadata cache of its kind (package targets), tells whether the
// remembered template is still current, so that polling an unchanged target
// costs no API read.
package podtemplates
