"""stacklab.lab.train"""
