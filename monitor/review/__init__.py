"""The review web app: routes (`app`), requests (`forms`), tokens (`auth`), `pages`, calibration."""
