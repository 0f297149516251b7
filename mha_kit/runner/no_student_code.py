"""The file a clean worker loads in place of a submission (`WorkerSubmission.clean_worker`): no
student code, so that the kit's own jobs run there in a process no student code has run in."""
