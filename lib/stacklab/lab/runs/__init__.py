"""stacklab.lab.runs"""
