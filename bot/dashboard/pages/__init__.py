"""The dashboard's pages: each a function from the data it shows to ``Html``, with no I/O.

``layout`` is the frame every page shares (the navigation, the user, the flash line) and the
small pieces pages are made of (sections, tables, action buttons); ``charts`` draws SVG on
the server (no script, no inline style: the CSP allows neither).
"""
