"""The verbs: each module parses its arguments, calls the stories below (see, doctor, sync, delivery, state, …)
and renders what they return. Reached by name from the CLI's verb table (cli.py); never imported by anything
below the CLI.
"""
