"""The review web app: routes (`app`), requests (`forms`), reviewer tokens (`auth`), `pages`."""
