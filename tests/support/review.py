"""Texts that would run script if the review page failed to escape them."""

XSS_SCRIPT = "<script>document.title='pwned'</script>"
XSS_IMG = "<img src=x onerror=\"document.title='pwned'\">"
