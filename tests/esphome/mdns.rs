// Being written (issue 22): mDNS tests.
